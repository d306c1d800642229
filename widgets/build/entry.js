// The graph library for widgets/panels.js: Cytoscape.js with the dagre
// layered layout registered. Built into ../graph.bundle.js (see package.json).
import cytoscape from "cytoscape";
import dagre from "cytoscape-dagre";

cytoscape.use(dagre);
export default cytoscape;

// The graph library for widgets/panels.js: Cytoscape.js with the dagre
// layered layout registered. Built into widgets/graph.bundle.js as the global
// TahrixCytoscape (an IIFE, so Python can join it with panels.js into one
// anywidget module, and a plain page can load it with a script tag).
import cytoscape from "cytoscape";
import dagre from "cytoscape-dagre";

cytoscape.use(dagre);
export default cytoscape;

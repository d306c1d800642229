// Builds widgets/graph.bundle.js (an IIFE defining TahrixCytoscape) and
// widgets/graph.bundle.LICENSES.txt from the pinned packages in node_modules.
const fs = require("fs");
const path = require("path");
const esbuild = require("esbuild");

const widgets = path.dirname(__dirname); // the folder this build folder sits in
esbuild.buildSync({
  entryPoints: [path.join(__dirname, "entry.js")],
  bundle: true,
  format: "iife",
  globalName: "TahrixCytoscape",
  minify: true,
  legalComments: "eof",
  target: "es2020",
  outfile: path.join(widgets, "graph.bundle.js"),
});

const out = [];
for (const name of ["cytoscape", "cytoscape-dagre"]) {
  const dir = path.join(__dirname, "node_modules", name);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  const file = fs.readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  out.push(`== ${name} ${pkg.version} (${pkg.license}) ==\n` + (file ? fs.readFileSync(path.join(dir, file), "utf8") : "(no licence file shipped)\n"));
}
out.push(
  "== dagre and graphlib (MIT), vendored inside cytoscape-dagre's dist ==\n" +
    "Copyright (c) 2012-2014 Chris Pettitt. Released under the MIT licence (same terms as above).\n",
);
fs.writeFileSync(path.join(widgets, "graph.bundle.LICENSES.txt"), out.join("\n"));

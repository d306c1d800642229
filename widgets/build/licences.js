// Writes ../graph.bundle.LICENSES.txt: the licence of every package inside the bundle.
const fs = require("fs");
const path = require("path");
const names = ["cytoscape", "cytoscape-dagre"];
const out = [];
for (const name of names) {
  const dir = path.join(__dirname, "node_modules", name);
  if (!fs.existsSync(dir)) continue;
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  const file = fs.readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  out.push(`== ${name} ${pkg.version} (${pkg.license}) ==\n` + (file ? fs.readFileSync(path.join(dir, file), "utf8") : "(no licence file shipped)\n"));
}
out.push(
  "== dagre and graphlib (MIT), vendored inside cytoscape-dagre's dist ==\n" +
    "Copyright (c) 2012-2014 Chris Pettitt. Released under the MIT licence (same terms as above).\n",
);
fs.writeFileSync(path.join(__dirname, "..", "graph.bundle.LICENSES.txt"), out.join("\n"));

// Bundles the front end into dist/ (index.html, app.js, styles.css): no CDN, no remote content.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

rmSync("dist", { recursive: true, force: true });
mkdirSync("dist");
await build({
  entryPoints: ["src/main.tsx"],
  bundle: true,
  outfile: "dist/app.js",
  format: "esm",
  target: "es2020",
  jsx: "automatic",
  jsxImportSource: "preact",
  minify: true,
  sourcemap: false,
  legalComments: "none",
  // The catalogs (Japanese, Chinese) as UTF-8, not \u escapes: about a third of their size.
  charset: "utf8",
});
copyFileSync("index.html", "dist/index.html");
copyFileSync("styles.css", "dist/styles.css");
console.log("ui: built dist/");

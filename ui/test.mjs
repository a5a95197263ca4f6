// Runs the front end's unit tests: bundles each *.test.ts under src/ with esbuild, then node --test.
import { build } from "esbuild";
import { readdirSync, mkdirSync, rmSync } from "node:fs";
import { spawnSync } from "node:child_process";

const tests = readdirSync("src", { recursive: true })
  .map(String)
  .filter((f) => f.endsWith(".test.ts"))
  .sort();
const out = (t) => `.test-build/${t.replace(/\.ts$/, ".mjs")}`;
rmSync(".test-build", { recursive: true, force: true });
mkdirSync(".test-build");
for (const t of tests) {
  await build({
    entryPoints: [`src/${t}`],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: out(t),
    // The compiler (for the no-string-left scan) is loaded from node_modules, not bundled.
    external: ["typescript"],
  });
}
const run = spawnSync(process.execPath, ["--test", ...tests.map(out)], {
  stdio: "inherit",
});
process.exit(run.status ?? 1);

// The window's calls follow the Rust commands' signatures: api.ts type-checks against the
// generated bindings, and a parameter renamed or retyped in Rust (as the regenerated bindings
// would say) fails the check at the call that still uses the old one.
import assert from "node:assert/strict";
import { test } from "node:test";
import ts from "typescript";

const OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  allowImportingTsExtensions: true,
  lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.dom.iterable.d.ts"],
  jsx: ts.JsxEmit.ReactJSX,
  jsxImportSource: "preact",
};

/** The type errors of `root` and what it imports, with bindings.ts's text changed by `edit`. */
function errorsWithBindings(edit: (bindings: string) => string, root = "src/api.ts"): string[] {
  const host = ts.createCompilerHost(OPTIONS);
  const read = host.readFile.bind(host);
  host.readFile = (file) => {
    const text = read(file);
    return text !== undefined && file.endsWith("src/bindings.ts") ? edit(text) : text;
  };
  const program = ts.createProgram([root], OPTIONS, host);
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
}

function replaced(text: string, from: string, to: string): string {
  assert.ok(text.includes(from), `bindings.ts has ${from}`);
  return text.replace(from, to);
}

test("the window type-checks against the bindings as generated", () => {
  assert.deepEqual(errorsWithBindings((b) => b), []);
  assert.deepEqual(errorsWithBindings((b) => b, "src/main.tsx"), []);
});

test("a renamed parameter fails the call that sends the old name", () => {
  const errors = errorsWithBindings((b) =>
    replaced(b, `"rename_project": { id: string; name: string };`, `"rename_project": { project: string; name: string };`),
  );
  assert.ok(errors.some((e) => e.includes("'project'") || e.includes("'id'")), errors.join("\n"));
});

test("a retyped parameter fails the call", () => {
  const errors = errorsWithBindings((b) =>
    replaced(b, `"waveform": { project: string; file: string; buckets: number };`, `"waveform": { project: string; file: string; buckets: string };`),
  );
  assert.ok(errors.some((e) => e.includes("number") && e.includes("string")), errors.join("\n"));
});

test("a retyped result fails the window's code that reads it", () => {
  const errors = errorsWithBindings(
    (b) => replaced(b, `"list_projects": ProjectEntry[];`, `"list_projects": string;`),
    "src/main.tsx",
  );
  assert.ok(errors.length > 0, "a string where projects were read type-checks");
});

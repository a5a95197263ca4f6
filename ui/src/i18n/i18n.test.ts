// The catalogs are complete and well formed, the pseudo-locale is longer and keeps its
// placeholders, and no string the window shows is left in code (every one goes through `t`).
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { test } from "node:test";
import { IntlMessageFormat } from "intl-messageformat";
import ts from "typescript";
import { en, type MessageKey } from "./en";
import { CATALOGS, LOCALES, matchLocale, systemLocale, type Locale } from "./index";

const KEYS = Object.keys(en) as MessageKey[];

// --- Arguments of an ICU message, from intl-messageformat's parse: `name:kind`, and for
// select arguments the options English offers.
type El = { type: number; value?: string; options?: Record<string, { value: El[] }>; children?: El[] };
// The parser's element types (TYPE in @formatjs/icu-messageformat-parser).
const KIND: Record<number, string> = { 1: "argument", 2: "number", 3: "date", 4: "time", 5: "select", 6: "plural", 8: "tag" };

function args(message: string, locale: string): Set<string> {
  const out = new Set<string>();
  const walk = (els: El[]) => {
    for (const el of els) {
      const kind = KIND[el.type];
      if (kind) out.add(`${el.value}:${kind}`);
      if (el.type === 5 && el.options) for (const option of Object.keys(el.options)) out.add(`${el.value}=${option}`);
      if (el.options) for (const o of Object.values(el.options)) walk(o.value);
      if (el.children) walk(el.children);
    }
  };
  walk(new IntlMessageFormat(message, locale).getAst() as unknown as El[]);
  return out;
}

/** Values that satisfy every argument of `message` (numbers for plurals, the first option for
 * selects, text otherwise). */
function sampleValues(message: string): Record<string, string | number> {
  const values: Record<string, string | number> = {};
  for (const a of args(message, "en")) {
    const [name, kind] = a.split(":");
    if (kind === undefined) continue;
    values[name] = kind === "plural" || kind === "number" ? 2 : "x";
  }
  for (const a of args(message, "en")) {
    const m = a.match(/^(.+)=(.+)$/);
    if (m && m[2] !== "other") values[m[1]] = m[2];
  }
  return values;
}

const intlLocale = (l: Locale) => (l === "pseudo" ? "en" : l);

test("every catalog has exactly the English keys", () => {
  const problems: string[] = [];
  for (const [locale, catalog] of Object.entries(CATALOGS)) {
    const keys = new Set(Object.keys(catalog));
    for (const k of KEYS) if (!keys.has(k)) problems.push(`${locale}: missing ${k}`);
    for (const k of keys) if (!(k in en)) problems.push(`${locale}: extra ${k}`);
    for (const k of KEYS) if (typeof catalog[k] !== "string" || catalog[k].trim() === "") problems.push(`${locale}: empty ${k}`);
  }
  assert.deepEqual(problems, [], problems.join("\n"));
});

test("the six languages are there", () => {
  assert.deepEqual([...LOCALES], ["en", "de", "es", "fr", "ja", "zh-Hans"]);
});

test("every message parses, formats, and has English's placeholders", () => {
  const problems: string[] = [];
  for (const [locale, catalog] of Object.entries(CATALOGS) as [Locale, Record<MessageKey, string>][]) {
    for (const k of KEYS) {
      let expected: Set<string>;
      let actual: Set<string>;
      try {
        expected = args(en[k], "en");
        actual = args(catalog[k], intlLocale(locale));
      } catch (e) {
        problems.push(`${locale} ${k}: does not parse: ${(e as Error).message}`);
        continue;
      }
      const missing = [...expected].filter((a) => !actual.has(a));
      const extra = [...actual].filter((a) => !expected.has(a));
      if (missing.length || extra.length)
        problems.push(`${locale} ${k}: placeholders differ (missing ${missing.join(", ") || "none"}; extra ${extra.join(", ") || "none"})`);
      try {
        const out = new IntlMessageFormat(catalog[k], intlLocale(locale)).format(sampleValues(en[k]));
        if (typeof out !== "string" || /[{}]/.test(out)) problems.push(`${locale} ${k}: formats as ${JSON.stringify(out)}`);
      } catch (e) {
        problems.push(`${locale} ${k}: does not format: ${(e as Error).message}`);
      }
    }
  }
  assert.deepEqual(problems, [], problems.join("\n"));
});

test("translations are translated (not English copied), apart from names and symbols", () => {
  // Messages that are the same in every language: product and format names, symbols, units.
  const SAME = /^(app\.name|unit\.|cloning\.chatterbox|memory\.unknown|narration\.play[AB]|lanes\.(inFlight|waiting)$)/;
  const problems: string[] = [];
  for (const locale of LOCALES.filter((l) => l !== "en")) {
    const same = KEYS.filter((k) => !SAME.test(k) && CATALOGS[locale][k] === en[k] && /\p{L}{3,}/u.test(en[k]));
    // A few may legitimately coincide (e.g. "Transcription" in French); most must not.
    if (same.length > KEYS.length * 0.05) problems.push(`${locale}: ${same.length} messages identical to English: ${same.join(", ")}`);
  }
  assert.deepEqual(problems, [], problems.join("\n"));
});

test("the pseudo-locale is longer, accented, and keeps every placeholder", () => {
  const problems: string[] = [];
  for (const k of KEYS) {
    const p = CATALOGS.pseudo[k];
    const sample = sampleValues(en[k]);
    const english = String(new IntlMessageFormat(en[k], "en").format(sample));
    const pseudo = String(new IntlMessageFormat(p, "en").format(sample));
    if (pseudo.length < english.length * 1.3 && /\p{L}{2,}/u.test(english)) problems.push(`${k}: not longer: ${pseudo}`);
    if (!pseudo.startsWith("[") || !pseudo.endsWith("]")) problems.push(`${k}: not bracketed: ${pseudo}`);
    if (/[a-z]{2,}/i.test(en[k].replace(/\{[^{}]*\}/g, "")) && !/[\u00C0-\u024F]/.test(pseudo)) problems.push(`${k}: not accented: ${pseudo}`);
    for (const v of Object.values(sample)) if (typeof v === "string" && v === "x" && !pseudo.includes("x")) problems.push(`${k}: lost a value`);
  }
  assert.deepEqual(problems, [], problems.join("\n"));
});

test("the system's language picks a supported locale, else English", () => {
  assert.equal(matchLocale("de-AT"), "de");
  assert.equal(matchLocale("zh-CN"), "zh-Hans");
  assert.equal(matchLocale("zh-Hans-SG"), "zh-Hans");
  assert.equal(matchLocale("zh-TW"), null);
  assert.equal(matchLocale("pt-BR"), null);
  assert.equal(systemLocale(["pt-BR", "fr-CA", "en"]), "fr");
  assert.equal(systemLocale(["zh-TW", "ja-JP"]), "ja");
  assert.equal(systemLocale(["sv"]), "en");
  assert.equal(systemLocale([]), "en");
});

// --- No string left in code.

/** Strings the window may show as they are: no letters (symbols, numbers, punctuation), or
 * names that are the same in every language (file formats, an environment variable). */
function allowed(text: string): boolean {
  const trimmed = text.trim();
  if (!/\p{L}/u.test(trimmed)) return true;
  // A catalog key (passed on to be shown with t()).
  if (trimmed in en) return true;
  return /^[A-Z][A-Z0-9_]*(=[a-z|]+)?$/.test(trimmed);
}

/** Attributes whose text a person reads or hears. */
const USER_ATTRIBUTES = new Set(["placeholder", "title", "aria-label", "alt", "label", "aria-description", "aria-valuetext", "aria-roledescription"]);
/** Calls whose string arguments are not shown (or are the catalog's keys). */
const NOT_SHOWN_CALLS = new Set(["t", "tr", "codeLabel", "has", "useJob", "jobId", "useEvent", "listen", "call", "on", "require", "querySelector", "getElementById", "addEventListener", "setAttribute", "startsWith", "endsWith", "includes", "split", "replace", "match", "padStart", "join", "matchLocale", "getItem", "setItem", "removeItem"]);

type Offence = { file: string; line: number; text: string; why: string };

function literalText(node: ts.Node): string | null {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node)) return [node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(" ");
  return null;
}

/** The literals an expression can render as text: through conditionals, `&&`/`||`/`??`,
 * parentheses, arrays and template literals; never into a `t(...)` call. */
function renderedLiterals(expr: ts.Expression): ts.Node[] {
  if (literalText(expr) !== null) return [expr];
  if (ts.isParenthesizedExpression(expr)) return renderedLiterals(expr.expression);
  if (ts.isConditionalExpression(expr)) return [...renderedLiterals(expr.whenTrue), ...renderedLiterals(expr.whenFalse)];
  if (ts.isBinaryExpression(expr)) {
    const op = expr.operatorToken.kind;
    if (op === ts.SyntaxKind.AmpersandAmpersandToken) return renderedLiterals(expr.right);
    if (op === ts.SyntaxKind.BarBarToken || op === ts.SyntaxKind.QuestionQuestionToken || op === ts.SyntaxKind.PlusToken)
      return [...renderedLiterals(expr.left), ...renderedLiterals(expr.right)];
  }
  if (ts.isArrayLiteralExpression(expr)) return expr.elements.flatMap((e) => renderedLiterals(e as ts.Expression));
  return [];
}

function calleeName(call: ts.CallExpression): string {
  const e = call.expression;
  if (ts.isIdentifier(e)) return e.text;
  if (ts.isPropertyAccessExpression(e)) return e.name.text;
  return "";
}

/** Whether a literal sits where its text is not shown: an import, a type, a comparison, a
 * catalog call, a non-text attribute (class, data-*, id, …), an object key or a `type` field. */
function notShown(node: ts.Node): boolean {
  for (let n: ts.Node = node; n.parent; n = n.parent) {
    const p = n.parent;
    if (ts.isImportDeclaration(p) || ts.isExportDeclaration(p) || ts.isTypeNode(p) || ts.isLiteralTypeNode(p)) return true;
    if (ts.isCallExpression(p) && p.arguments.includes(n as ts.Expression) && NOT_SHOWN_CALLS.has(calleeName(p))) return true;
    if (ts.isJsxAttribute(p)) return !USER_ATTRIBUTES.has(p.name.getText());
    if (ts.isBinaryExpression(p)) {
      const op = p.operatorToken.kind;
      if (
        op === ts.SyntaxKind.EqualsEqualsEqualsToken ||
        op === ts.SyntaxKind.ExclamationEqualsEqualsToken ||
        op === ts.SyntaxKind.EqualsEqualsToken ||
        op === ts.SyntaxKind.ExclamationEqualsToken ||
        op === ts.SyntaxKind.InKeyword
      )
        return true;
    }
    if (ts.isCaseClause(p) && p.expression === n) return true;
    if (ts.isPropertyAssignment(p) && (p.name === n || ["type", "id", "state", "action", "kind", "label"].includes(p.name.getText())))
      return true;
    if (ts.isElementAccessExpression(p) && p.argumentExpression === n) return true;
    if (
      ts.isBinaryExpression(p) &&
      p.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
      ts.isPropertyAccessExpression(p.left) &&
      ["className", "id", "testid", "lang"].includes(p.left.name.text)
    )
      return true;
    if ((ts.isJsxExpression(p) && !ts.isJsxAttribute(p.parent)) || ts.isJsxElement(p)) return false;
    if (ts.isFunctionLike(p) || ts.isBlock(p) || ts.isSourceFile(p)) return false;
  }
  return false;
}

function scan(file: string, source: string): Offence[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, file.endsWith(".tsx") ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const out: Offence[] = [];
  const seen = new Set<ts.Node>();
  const report = (node: ts.Node, text: string, why: string) => {
    if (seen.has(node)) return;
    seen.add(node);
    if (allowed(text)) return;
    const { line } = sf.getLineAndCharacterOfPosition(node.getStart(sf));
    out.push({ file, line: line + 1, text: text.trim().replace(/\s+/g, " "), why });
  };
  const visit = (node: ts.Node) => {
    if (ts.isJsxText(node)) {
      report(node, node.text, "JSX text");
    } else if (ts.isJsxAttribute(node) && USER_ATTRIBUTES.has(node.name.getText()) && node.initializer) {
      const init = node.initializer;
      if (ts.isStringLiteral(init)) report(init, init.text, `${node.name.getText()}=`);
      else if (ts.isJsxExpression(init) && init.expression)
        for (const lit of renderedLiterals(init.expression)) report(lit, literalText(lit) ?? "", `${node.name.getText()}=`);
    } else if (ts.isJsxExpression(node) && node.expression && !ts.isJsxAttribute(node.parent)) {
      for (const lit of renderedLiterals(node.expression)) report(lit, literalText(lit) ?? "", "JSX child");
    } else if (literalText(node) !== null && !seen.has(node) && !notShown(node)) {
      // Prose anywhere else (a string built for the window outside JSX): two or more words.
      const text = literalText(node)!;
      if (/\p{L}{2,}[ \u00A0]+\p{L}{2,}/u.test(text)) report(node, text, "prose in code");
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

test("no string the window shows is left in code", () => {
  const root = join(process.cwd(), "src");
  const files = readdirSync(root, { recursive: true })
    .map(String)
    .filter((f) => /\.tsx?$/.test(f) && !/\.test\.ts$/.test(f) && !f.startsWith("i18n") && f !== "bindings.ts")
    .sort();
  assert.ok(files.some((f) => f.endsWith("main.tsx")), `the sources are under ${root}`);
  const offences = files.flatMap((f) => scan(relative(process.cwd(), join(root, f)), readFileSync(join(root, f), "utf8")));
  assert.deepEqual(
    offences.map((o) => `${o.file}:${o.line}: ${o.why}: ${JSON.stringify(o.text)}`),
    [],
    "strings left in code (put them in src/i18n/en.ts and the other catalogs, and show them with t()):",
  );
});

test("the scan finds strings left in code", () => {
  const found = scan(
    "sample.tsx",
    `export const A = () => (
  <div title="Hover text" class="not text" data-testid="x">
    Hello there
    {busy ? "Working…" : t("ok")}
    <input placeholder={\`Type \${n} here\`} aria-label={t("label")} />
    {"▶"} · 12
  </div>
);
const msg = "Something went wrong";
if (kind === "not shown either") {}
`,
  ).map((o) => `${o.line}:${o.text}`);
  assert.deepEqual(found, ["2:Hover text", "3:Hello there", "4:Working…", "5:Type here", "9:Something went wrong"]);
});

test("English keeps the texts the UI suite reads (tests/desktop/ui.rs)", async () => {
  const i18n = await import("./index");
  const { occupancyLine } = await import("../rejection");
  i18n.setLocale("en");
  assert.equal(i18n.t("reason.text_lane_full"), "Text lane full");
  assert.equal(i18n.t("reason.gpu_memory_pressure"), "GPU memory pressure");
  assert.equal(i18n.t("reason.remote_not_allowed"), "Not allowed to leave this machine");
  assert.equal(
    occupancyLine({ reason: "text_lane_full", lane: "text", in_flight: 2, limit: 2, waiting: 0, wait_limit: 0 } as never),
    "Text lane: 2 of 2 running, 0 of 0 waiting",
  );
  assert.equal(i18n.t("gpu.peak", { value: i18n.formatMib(22000) }), "peak 22000 MiB");
  assert.equal(i18n.t("gpu.baseline", { value: i18n.formatMib(8000) }), "baseline 8000 MiB");
  assert.equal(i18n.t("gpu.delta", { value: i18n.formatMib(14000) }), "delta 14000 MiB");
  assert.equal(i18n.t("speakers.default", { n: "3" }), "Speaker 3");
  assert.equal(i18n.t("settings.connected", { count: 1 }), "Connected: 1 model.");
  assert.equal(i18n.t("source.rule_based"), "rule-based");
  assert.equal(i18n.t("source.llm"), "text model");
  assert.equal(i18n.t("decision.pending"), "pending");
  assert.equal(i18n.t("decision.accepted"), "accepted");
  assert.match(i18n.t("cleanup.off"), /nothing leaves this machine/);
  assert.match(i18n.t("cleanup.sent"), /sent to/);
  assert.equal(i18n.t("cleanup.thisMachine"), "(this machine)");
  assert.equal(i18n.t("gpu.none"), "No NVIDIA GPU detected.");
  assert.match(i18n.t("settings.renderSoftware"), /drawn on the CPU/);
  assert.equal(
    i18n.t("narration.summary", { narrated: 3, segments: 3, redone: 1, unchanged: 2, seconds: i18n.formatSeconds(4.25) }),
    "3 of 3 segments narrated (1 redone, 2 unchanged) in 4.3 s",
  );
  const similarity = i18n.t("synth.similarity", {
    search: i18n.formatNumber(0.8123, 3),
    independent: i18n.t("sim.independent", { value: i18n.formatNumber(0.7, 3) }),
    default: "0.500",
  });
  assert.equal(similarity, "similarity 0.812 (search's embedder) · 0.700 (independent: Resemblyzer) (default voice 0.500)");
  assert.equal(i18n.formatPercent(0.5), "50%");
  assert.equal(i18n.formatSeconds(1.5), "1.5 s");
});

test("a language's numbers and plurals come from Intl", async () => {
  const i18n = await import("./index");
  i18n.setLocale("de");
  assert.equal(i18n.formatSeconds(1.5), "1,5 s");
  assert.equal(i18n.t("transcribe.segments", { count: 1 }), "1 Segment");
  assert.equal(i18n.t("transcribe.segments", { count: 1200 }), "1.200 Segmente");
  i18n.setLocale("fr");
  assert.match(i18n.formatPercent(0.5), /^50\s%$/u);
  i18n.setLocale("ja");
  assert.equal(i18n.t("transcribe.segments", { count: 2 }), "2 セグメント");
  i18n.setLocale("pseudo");
  assert.match(i18n.t("nav.projects"), /^\[Ƥŕ.*\]$/);
  i18n.setLocale("en");
});

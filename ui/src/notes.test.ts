import assert from "node:assert/strict";
import { test } from "node:test";
import { setLocale } from "./i18n";
import { signalMessage, textNote, voiceNote } from "./rejection";

test("a note with a code is worded in the window's language; one without keeps its English", () => {
  setLocale("de");
  const ruled = textNote({ kind: "rule_based", reasons: ["text_lane_full", "unusable_reply"] }, "Cleaned up by the rules: …");
  assert.ok(ruled?.startsWith("Von den Regeln bereinigt: "), ruled ?? "");
  assert.ok(!ruled?.includes("Cleaned"), ruled ?? "");
  const voice = voiceNote({ kind: "speaks_english_only", voice: "kokoro-af_heart", language: "es", instead: "es" }, "English");
  assert.ok(voice?.includes("kokoro-af_heart") && voice.includes("Spanisch"), voice ?? "");
  assert.equal(textNote(null, "Cleaned up by the rules: old file"), "Cleaned up by the rules: old file");
  assert.equal(textNote(undefined, null), null);
  setLocale("zh-Hans");
  // Listed things keep a separator in Chinese too.
  const listed = textNote({ kind: "rule_based", reasons: ["text_lane_full", "unusable_reply"] }, null) ?? "";
  assert.match(listed, /[、和]/, listed);
  setLocale("en");
  assert.equal(textNote({ kind: "rules_instead_of_rewrite" }, null)?.startsWith("LLM cleanup is off"), true);
});

const SIGNAL = {
  alert: "HeadroomCleanupFallingBack",
  severity: "warning",
  threshold: 0.2,
  since_unix_ms: 0,
  window_mins: 10,
  for_mins: 5,
} as const;

test("a crossed signal is worded in the window's language from its code, value and labels", () => {
  setLocale("de");
  const fallback = signalMessage({
    ...SIGNAL,
    code: "cleanup_fallback_rate",
    labels: { project: "interview" },
    value: 0.4,
    unit: "percent",
    message_en: "40% of project interview's segments fell back to the rules in the last 10 min: …",
  });
  assert.match(fallback, /^40\s% der Segmente von Projekt interview /u);
  assert.ok(fallback.includes("10 Min.") && fallback.includes("max_in_flight"), fallback);
  assert.ok(!fallback.includes("fell back"), fallback);
  // Labels that are codes are worded too; counts take the language's plural.
  const refused = signalMessage({
    ...SIGNAL,
    code: "text_rejection_rate",
    labels: { reason: "deadline_exceeded" },
    value: 0.125,
    unit: "percent",
    message_en: "",
  });
  assert.match(refused, /^12,5\s% der Textanfragen .* \(Frist verpasst\)/u);
  setLocale("en");
  const flapping = (value: number) =>
    signalMessage({ ...SIGNAL, code: "upstream_flapping", labels: { upstream: "http://b" }, value, unit: "count", message_en: "" });
  assert.ok(flapping(1).includes("changed health once in the last 10 min"), flapping(1));
  assert.ok(flapping(6).includes("changed health 6 times"), flapping(6));
  const leak = signalMessage({ ...SIGNAL, code: "gpu_memory_floor_rising", labels: {}, value: 268435456, unit: "bytes_per_hour", message_en: "" });
  assert.ok(leak.startsWith("the GPU memory floor rose 256 MiB per hour over the last 10 min: "), leak);
  // A signal this window has no words for keeps the core's English.
  const unknown = signalMessage({ ...SIGNAL, code: "new_signal", labels: {}, value: 1, unit: "count", message_en: "as the core says it" });
  assert.equal(unknown, "as the core says it");
});

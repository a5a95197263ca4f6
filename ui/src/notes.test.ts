import assert from "node:assert/strict";
import { test } from "node:test";
import { setLocale } from "./i18n";
import { textNote, voiceNote } from "./rejection";

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

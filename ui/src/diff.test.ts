import { test } from "node:test";
import assert from "node:assert/strict";
import { wordDiff } from "./diff.ts";

const join = (parts: { kind: string; text: string }[], keep: string[]) =>
  parts.filter((p) => keep.includes(p.kind)).map((p) => p.text).join("");

test("both sides can be rebuilt from the diff", () => {
  const before = "um so we we went to the the market";
  const after = "So we went to the market.";
  const parts = wordDiff(before, after);
  assert.equal(join(parts, ["same", "removed"]), before);
  assert.equal(join(parts, ["same", "added"]), after);
  assert.ok(parts.some((p) => p.kind === "removed" && p.text.includes("um")));
});

test("identical text is one unchanged part", () => {
  assert.deepEqual(wordDiff("a b c", "a b c"), [{ kind: "same", text: "a b c" }]);
});

test("empty sides", () => {
  assert.deepEqual(wordDiff("", "new"), [{ kind: "added", text: "new" }]);
  assert.deepEqual(wordDiff("old", ""), [{ kind: "removed", text: "old" }]);
});

import { test } from "node:test";
import assert from "node:assert/strict";
import type { EditIntent } from "../bindings.ts";
import {
  changed,
  changeTo,
  cutStretches,
  deleteChange,
  emptyHistory,
  HISTORY_KEPT,
  isSelected,
  moved,
  selectionRun,
  step,
  wordId,
} from "./edit.state.ts";

const at = (segment: number, word: number) => ({ segment, word });
const intent = (struck: number[]): EditIntent => ({
  cut_fillers: false,
  max_pause: null,
  room_tone: false,
  cuts: [],
  struck_words: struck,
  kept_words: [],
});

test("a word's id counts from 1; a selection is a run in either direction", () => {
  assert.equal(wordId(at(0, 0)), "1:1");
  assert.equal(wordId(at(11, 4)), "12:5");
  const backwards = { anchor: at(3, 2), focus: at(1, 7) };
  assert.equal(selectionRun(backwards), "2:8-4:3");
  assert.equal(selectionRun({ anchor: at(2, 1), focus: at(2, 1) }), "3:2");
  assert.ok(isSelected(backwards, at(2, 0)), "a whole segment between its ends");
  assert.ok(isSelected(backwards, at(1, 7)) && isSelected(backwards, at(3, 2)), "both ends");
  assert.ok(!isSelected(backwards, at(1, 6)) && !isSelected(backwards, at(3, 3)), "nothing outside");
  assert.ok(!isSelected(null, at(0, 0)));
});

test("Delete cuts a selection unless every word of it is cut already, which brings it back", () => {
  const s = { anchor: at(0, 1), focus: at(0, 2) };
  const known = [at(0, 1), at(0, 2)];
  assert.deepEqual(deleteChange(s, known, new Set(["1:2"])).strike, ["1:2-1:3"], "one still kept: cut them");
  const back = deleteChange(s, known, new Set(["1:2", "1:3"]));
  assert.deepEqual(back.keep, ["1:2-1:3"]);
  assert.deepEqual(back.strike, []);
  assert.deepEqual(deleteChange(s, [], new Set(["1:2", "1:3"])).strike, ["1:2-1:3"], "nothing known: cut");
});

test("the stretches cut are the gaps between kept ranges and after the last", () => {
  const list = {
    kept: [
      { start: 0.5, end: 2 },
      { start: 2, end: 3, room_tone: true },
      { start: 4, end: 9 },
    ],
    room_tone: { start: 7, end: 7.4 },
  };
  assert.deepEqual(cutStretches(list, 10), [
    [0, 0.5],
    [3, 4],
    [9, 10],
  ]);
  assert.deepEqual(cutStretches(null, 10), []);
  assert.deepEqual(cutStretches({ kept: [{ start: 0, end: 10 }] }, 10), [], "the whole recording: nothing cut");
});

test("undo goes back through the edits made and redo forward, until a new edit", () => {
  const [a, b, c] = [intent([1]), intent([1, 2]), intent([1, 2, 3])];
  // No edit, then a, then b, then c.
  let h = changed(emptyHistory, null);
  h = changed(h, a);
  h = changed(h, b);
  const undo1 = step(h, c, true)!;
  assert.deepEqual(undo1.to, b);
  const undo2 = step(undo1.history, b, true)!;
  assert.deepEqual(undo2.to, a);
  const redo = step(undo2.history, a, false)!;
  assert.deepEqual(redo.to, b);
  const again = step(redo.history, b, false)!;
  assert.deepEqual(again.to, c);
  assert.equal(step(again.history, c, false), null, "nothing more to redo");
  // Back to the start: no edit at all, which a change asks by clearing.
  let back = step(again.history, c, true)!;
  back = step(back.history, back.to, true)!;
  back = step(back.history, back.to, true)!;
  assert.equal(back.to, null);
  assert.equal(step(back.history, null, true), null, "nothing more to undo");
  assert.deepEqual(changeTo(null).clear, true);
  assert.deepEqual(changeTo(a).from, a);
  // A new edit after undoing drops what could be redone.
  const fresh = changed(undo1.history, b);
  assert.deepEqual(fresh.future, []);
});

test("the history keeps the last hundred edits", () => {
  let h = emptyHistory;
  for (let i = 0; i < HISTORY_KEPT + 20; i++) h = changed(h, intent([i]));
  assert.equal(h.past.length, HISTORY_KEPT);
  assert.deepEqual(h.past[0], intent([20]));
});

test("arrows, Home and End move within a segment's words and stop at its ends", () => {
  assert.equal(moved("ArrowRight", 2, 5), 3);
  assert.equal(moved("ArrowRight", 4, 5), 4);
  assert.equal(moved("ArrowLeft", 0, 5), 0);
  assert.equal(moved("End", 1, 5), 4);
  assert.equal(moved("Home", 3, 5), 0);
  assert.equal(moved("a", 3, 5), null);
});

import { test } from "node:test";
import assert from "node:assert/strict";
import type { LiveLine, UiError } from "../api.ts";
import { initialState, reducer, segmentsMatching, type Action, type State } from "./transcribe.state.ts";

const run = (state: State, ...actions: Action[]) => actions.reduce(reducer, state);
const refused: UiError = { kind: "rejected", message: "Audio lane full", rejection: null, actions: [] };
const line = (text: string, start = 0): LiveLine => ({ start, end: start + 1, text });

test("a transcription starts from nothing: no progress, error or last export", () => {
  let s = run(
    initialState,
    { type: "progress", progress: 0.7 },
    { type: "error", error: refused },
    { type: "exported", path: "exports/a.srt" },
  );
  s = reducer(s, { type: "transcribe-started" });
  assert.equal(s.progress, 0);
  assert.equal(s.error, null);
  assert.equal(s.exported, null);
  s = run(s, { type: "progress", progress: 0.5 }, { type: "error", error: refused });
  assert.equal(s.progress, 0.5);
  assert.equal(s.error, refused, "a failure is shown");
});

test("recording live: partials are replaced, finals kept in order, and a stop drops the partial and level", () => {
  let s = run(initialState, { type: "error", error: refused }, { type: "live-transcript", partial: null, finals: [line("old")] });
  s = reducer(s, { type: "record-started" });
  assert.equal(s.error, null);
  assert.deepEqual(s.liveFinals, [], "a new recording starts a new live transcript");
  s = run(
    s,
    { type: "level", dbfs: -18 },
    { type: "live-transcript", partial: line("hel"), finals: [] },
    { type: "live-transcript", partial: line("hello th"), finals: [] },
  );
  assert.equal(s.livePartial?.text, "hello th");
  s = run(
    s,
    { type: "live-transcript", partial: null, finals: [line("hello there")] },
    { type: "live-transcript", partial: null, finals: [line("second", 2)] },
  );
  assert.equal(s.livePartial, null);
  assert.deepEqual(
    s.liveFinals.map((l) => l.text),
    ["hello there", "second"],
  );
  s = run(s, { type: "live-transcript", partial: line("thi"), finals: [] }, { type: "record-stopped" });
  assert.equal(s.level, null);
  assert.equal(s.livePartial, null);
  assert.equal(s.liveFinals.length, 2, "the finals stay until the recording's outcome is known");
});

test("a recording's file becomes the path; transcribed live, its live lines give way to the project", () => {
  const recording = run(initialState, { type: "live-transcript", partial: null, finals: [line("a")] });
  const live = reducer(recording, { type: "recorded", file: "recording-1.wav", transcribed: true });
  assert.equal(live.path, "recording-1.wav");
  assert.deepEqual(live.liveFinals, []);
  const fallback = reducer(recording, { type: "recorded", file: "recording-1.wav", transcribed: false });
  assert.equal(fallback.path, "recording-1.wav");
  assert.equal(fallback.liveFinals.length, 1);
});

test("a saved edit drops its draft only if nothing was typed since", () => {
  let s = run(initialState, { type: "draft", index: 1, text: "hello" }, { type: "draft", index: 2, text: "x" });
  const typedOn = run(s, { type: "draft", index: 1, text: "hello wor" }, { type: "draft-saved", index: 1, text: "hello" });
  assert.equal(typedOn.drafts[1], "hello wor", "a late save never puts older text in the field");
  s = reducer(s, { type: "draft-saved", index: 1, text: "hello" });
  assert.deepEqual(s.drafts, { 2: "x" });
});

test("search finds every segment holding the text, in any case, and nothing for blanks", () => {
  const texts = ["The hydrophone was cold.", "Gulls over the ferry.", "HYDROPHONE calibration done", ""];
  assert.deepEqual(segmentsMatching(texts, "hydrophone"), [0, 2]);
  assert.deepEqual(segmentsMatching(texts, "  Calibration "), [2]);
  assert.deepEqual(segmentsMatching(texts, "whale"), []);
  assert.deepEqual(segmentsMatching(texts, "   "), []);
});

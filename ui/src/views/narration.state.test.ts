import { test } from "node:test";
import assert from "node:assert/strict";
import type { NarratedSegment, NarrationSummary, NarrationView, ProjectSettings, SegmentState } from "../api.ts";
import { initialState, narrationOptions, reducer, type Action, type State } from "./narration.state.ts";

const settings = { cleanup_mode: "rewrite", failure_policy: "fallback" } as ProjectSettings;
const run = (state: State, ...actions: Action[]) => actions.reduce(reducer, state);
const seg = (text: string) => ({ text }) as unknown as NarratedSegment;
const waiting: SegmentState = { state: "waiting" };

function view(narrated: boolean): NarrationView {
  return {
    llm: true,
    states: [waiting, waiting],
    speakers: [
      { speaker: "S1", name: "Ada", voice: "kokoro-af", source: "default" },
      { speaker: "S2", name: "Grace", voice: "kokoro-bf", source: "chosen" },
    ],
    narration: narrated
      ? ({
          settings: {
            mode: "translate",
            language: "de",
            voice: null,
            policy: "retry",
            mix: true,
            llm: true,
            speaker_voices: { S2: "profile:grace" },
          },
          segments: [seg("eins"), seg("zwei")],
          output: null,
          voice_note: null,
        } as NarrationView["narration"])
      : null,
  };
}

test("before a narration exists the choices follow the project's settings", () => {
  const s = reducer(initialState(settings), { type: "loaded", view: view(false), restore: true });
  assert.equal(s.choices.mode, "rewrite");
  assert.equal(s.choices.policy, "fallback");
  assert.equal(s.choices.voice, "");
  assert.deepEqual(s.segments, []);
});

test("opening the view restores the last run's choices; reloading after a run keeps the user's", () => {
  let s = reducer(initialState(settings), { type: "loaded", view: view(true), restore: true });
  assert.deepEqual(s.choices, {
    mode: "translate",
    language: "de",
    voice: "",
    policy: "retry",
    mix: true,
    speakerVoices: { S2: "profile:grace" },
  });
  assert.deepEqual(s.segments.map((n) => n?.text), ["eins", "zwei"]);
  s = run(s, { type: "mode", mode: "cleanup" }, { type: "loaded", view: view(true), restore: false });
  assert.equal(s.choices.mode, "cleanup");
});

test("a run: planned, segments as they change (a synthesized take is not saved yet), summary, end", () => {
  const summary = { narrated: 2, segments: 2 } as NarrationSummary;
  let s = run(
    initialState(settings),
    { type: "loaded", view: view(true), restore: true },
    { type: "run-finished", summary },
    { type: "run-started" },
  );
  assert.equal(s.summary, null, "a new run hides the last one's summary");
  s = reducer(s, { type: "planned", count: 2 });
  assert.deepEqual(s.progress, { done: 0, of: 2 });
  s = reducer(s, { type: "segment", index: 0, state: { state: "synthesized" }, segment: seg("new"), done: 0, of: 2 });
  assert.equal(s.states[0].state, "synthesized");
  assert.equal(s.segments[0]?.text, "eins", "the saved segment stays until its take is fitted");
  s = reducer(s, { type: "segment", index: 0, state: { state: "fitted" }, segment: seg("new"), done: 1, of: 2 });
  assert.equal(s.segments[0]?.text, "new");
  assert.deepEqual(s.progress, { done: 1, of: 2 });
  const refused: SegmentState = { state: "text_refused", reason: "text_lane_full", message: "full" };
  s = reducer(s, { type: "segment", index: 1, state: refused, segment: seg("zwei"), done: 2, of: 2 });
  assert.equal(s.states[1], refused);
  s = run(s, { type: "run-finished", summary }, { type: "run-ended" });
  assert.equal(s.summary, summary);
  assert.equal(s.progress, null);
});

test("a cancelled or refused run ends without progress and without a summary", () => {
  const s = run(initialState(settings), { type: "run-started" }, { type: "planned", count: 3 }, { type: "run-ended" });
  assert.equal(s.progress, null);
  assert.equal(s.summary, null);
});

test("the options name every speaker, so one set back to its default is cleared", () => {
  let s = reducer(initialState(settings), { type: "loaded", view: view(true), restore: true });
  s = run(s, { type: "speaker-voice", speaker: "S2", voice: "" }, { type: "voice", voice: "kokoro-am" });
  assert.deepEqual(narrationOptions(s), {
    mode: "translate",
    to: "de",
    voice: "kokoro-am",
    policy: "retry",
    mix: true,
    speaker_voices: { S1: "", S2: "" },
  });
  s = reducer(s, { type: "mode", mode: "cleanup" });
  assert.equal(narrationOptions(s).to, null, "only a translation has a target language");
});

import { test } from "node:test";
import assert from "node:assert/strict";
import type { ClipAdded, ClipReport, MatchProgress, VoiceProfile, VoiceTakeView } from "../api.ts";
import { initialState, reducer, selectedVoice, type Action, type State } from "./voices.state.ts";

const voice = (id: string, clips = 0): VoiceProfile =>
  ({ id, name: id, clips: Array.from({ length: clips }, (_, i) => ({ id: `clip-${i}` })), matched: null }) as unknown as VoiceProfile;
const report = { seconds: 2, findings: [{ check: "too_short" }] } as unknown as ClipReport;
const take = { file: "take.wav", method: "kokoro" } as unknown as VoiceTakeView;
const run = (state: State, ...actions: Action[]) => actions.reduce(reducer, state);

test("opening another voice drops the last one's take and refused clip", () => {
  let s = run(initialState, { type: "loaded", voices: [voice("a"), voice("b")] }, { type: "selected", id: "a" });
  s = run(
    s,
    { type: "spoken", take },
    { type: "clip-checked", result: { added: false, report, voice: voice("a") } as ClipAdded, fromPath: true },
  );
  assert.equal(s.take, take);
  assert.equal(s.refused, report);
  s = reducer(s, { type: "selected", id: "b" });
  assert.equal(selectedVoice(s)?.id, "b");
  assert.equal(s.take, null);
  assert.equal(s.refused, null);
});

test("creating a voice clears the name field and opens it fresh; deleting closes it", () => {
  let s = run(
    initialState,
    { type: "loaded", voices: [voice("a")] },
    { type: "selected", id: "a" },
    { type: "spoken", take },
    { type: "typed", field: "newName", value: "Narrator" },
  );
  assert.equal(s.newName, "Narrator");
  s = run(s, { type: "created", id: "narrator" }, { type: "loaded", voices: [voice("a"), voice("narrator")] });
  assert.equal(s.newName, "");
  assert.equal(selectedVoice(s)?.id, "narrator");
  assert.equal(s.take, null, "the other voice's take is not shown under the new one");
  s = run(s, { type: "deleted" }, { type: "loaded", voices: [voice("a")] });
  assert.equal(s.selected, null);
  assert.equal(selectedVoice(s), null);
});

test("a clip added from the path field clears it; a refused one keeps it and says why", () => {
  let s = run(
    initialState,
    { type: "loaded", voices: [voice("a")] },
    { type: "selected", id: "a" },
    { type: "typed", field: "clipPath", value: "/tmp/short.wav" },
    { type: "clip-checked", result: { added: false, report, voice: voice("a") } as ClipAdded, fromPath: true },
  );
  assert.equal(s.clipPath, "/tmp/short.wav");
  assert.equal(s.refused, report);
  s = run(
    s,
    { type: "typed", field: "clipPath", value: "/tmp/good.wav" },
    { type: "clip-checked", result: { added: true, report, voice: voice("a", 1) } as ClipAdded, fromPath: true },
  );
  assert.equal(s.clipPath, "");
  assert.equal(s.refused, null);
  assert.equal(selectedVoice(s)?.clips.length, 1, "the voice is replaced by the one that came back");
});

test("a recorded clip leaves the path field alone; recording starts with no level shown", () => {
  let s = run(initialState, { type: "typed", field: "clipPath", value: "/tmp/x.wav" }, { type: "level", dbfs: -20 });
  s = reducer(s, { type: "record-started" });
  assert.equal(s.level, null);
  s = reducer(s, { type: "clip-checked", result: { added: true, report, voice: voice("a", 1) } as ClipAdded, fromPath: false });
  assert.equal(s.clipPath, "/tmp/x.wav");
});

test("a new voice match starts without the last one's progress", () => {
  const progress = { stage: "search", evaluations: 3, total: 4, best_similarity: 0.5 } as MatchProgress;
  let s = reducer(initialState, { type: "match-progress", progress });
  assert.equal(s.progress, progress);
  s = reducer(s, { type: "match-started" });
  assert.equal(s.progress, null);
});

test("renaming clears the field; saving the cloning server clears its last test", () => {
  let s = run(
    initialState,
    { type: "loaded", voices: [voice("a")] },
    { type: "typed", field: "rename", value: "Grace" },
    { type: "health", health: { url: "u", detail: "ok" } as never },
  );
  s = reducer(s, { type: "renamed", voice: { ...voice("a"), name: "Grace" } });
  assert.equal(s.rename, "");
  assert.equal(s.voices[0].name, "Grace");
  s = reducer(s, { type: "settings-saved" });
  assert.equal(s.health, null);
});

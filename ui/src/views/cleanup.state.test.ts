import { test } from "node:test";
import assert from "node:assert/strict";
import type { UiError } from "../api.ts";
import { ALL, initialState, reducer, type Action, type State } from "./cleanup.state.ts";

const run = (state: State, ...actions: Action[]) => actions.reduce(reducer, state);
const error = (kind: UiError["kind"], message = kind): UiError => ({ kind, message, rejection: null, actions: [] });

test("a segment's cleanup: start streams from nothing and clears its old refusal; end drops the job and stream", () => {
  let s = run(initialState, { type: "failed", index: 1, error: error("rejected") }, { type: "failed", index: 2, error: error("rejected") });
  s = reducer(s, { type: "segment-started", index: 1, job: "cleanup-1-x" });
  assert.equal(s.running[1], "cleanup-1-x");
  assert.equal(s.streams[1], "");
  assert.equal(s.errors[1], undefined);
  assert.ok(s.errors[2], "another segment's refusal stays");
  s = run(s, { type: "delta", index: 1, text: "So we " }, { type: "delta", index: 1, text: "went." });
  assert.equal(s.streams[1], "So we went.");
  s = reducer(s, { type: "stream-restarted", index: 1 });
  assert.equal(s.streams[1], "", "a retried chunk streams again from nothing");
  s = reducer(s, { type: "segment-ended", index: 1 });
  assert.deepEqual(s.running, {});
  assert.deepEqual(s.streams, {});
});

test("a refused segment keeps its refusal after its job ends, until dismissed", () => {
  const refusal = error("rejected", "Text lane full");
  let s = run(
    initialState,
    { type: "segment-started", index: 0, job: "j" },
    { type: "failed", index: 0, error: refusal },
    { type: "segment-ended", index: 0 },
  );
  assert.equal(s.errors[0], refusal);
  s = reducer(s, { type: "dismissed", index: 0 });
  assert.deepEqual(s.errors, {});
});

test("clean all: one segment at a time, refusals at their segment, the next one streaming", () => {
  let s = run(initialState, { type: "failed", index: 3, error: error("rejected") });
  s = reducer(s, { type: "batch-started", job: "all" });
  assert.equal(s.batch, "all");
  assert.deepEqual(s.errors, {}, "a new run starts without the last one's refusals");
  assert.deepEqual(s.running, { 0: "all" });
  assert.deepEqual(s.streams, { 0: "" });

  const refusal = error("rejected", "GPU memory pressure");
  s = reducer(s, { type: "batch-progress", job: "all", index: 0, count: 3, error: refusal });
  assert.equal(s.errors[0], refusal);
  assert.deepEqual(s.running, { 1: "all" });
  assert.equal(s.streams[1], "");
  s = reducer(s, { type: "batch-progress", job: "all", index: 1, count: 3, error: null });
  assert.deepEqual(s.running, { 2: "all" });
  s = reducer(s, { type: "batch-progress", job: "all", index: 2, count: 3, error: null });
  assert.deepEqual(s.running, {}, "after the last segment nothing runs");
  s = reducer(s, { type: "batch-ended" });
  assert.equal(s.batch, null);
  assert.equal(s.errors[0], refusal, "the refusal stays where it happened");
});

test("clean all cancelled shows no error; failed, it shows above the list", () => {
  const started = reducer(initialState, { type: "batch-started", job: "all" });
  const cancelled = run(started, { type: "batch-failed", error: error("cancelled") }, { type: "batch-ended" });
  assert.deepEqual(cancelled.errors, {});
  assert.equal(cancelled.batch, null);
  assert.deepEqual(cancelled.running, {});
  const failed = run(started, { type: "batch-failed", error: error("error", "disk full") }, { type: "batch-ended" });
  assert.equal(failed.errors[ALL]?.message, "disk full");
});

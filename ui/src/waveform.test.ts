import assert from "node:assert/strict";
import { test } from "node:test";
import { joinedSpans, MAX_SEGMENT_CONTROLS, segmentControls } from "./waveform";

test("spans closer than the drawing's resolution are drawn as one", () => {
  assert.deepEqual(
    joinedSpans(
      [
        [0, 1],
        [1.2, 2],
        [5, 6],
        [5.5, 5.8],
      ],
      0.5,
    ),
    [
      [0, 2],
      [5, 6],
    ],
  );
  // Three hours of 4 s segments with half-second pauses, on 600 units: one shape.
  const segments: [number, number][] = Array.from({ length: 2700 }, (_, k) => [(k * 4 * 600) / 10800, ((k * 4 + 3.5) * 600) / 10800]);
  assert.equal(joinedSpans(segments, 0.5).length, 1);
  assert.deepEqual(joinedSpans([], 1), []);
});

test("a long transcript's segments are controls only where their rows are on screen", () => {
  assert.equal(segmentControls(12, undefined).length, 12, "few: every segment");
  assert.deepEqual(segmentControls(2700, undefined, 0, null), [0], "rows not known yet: the active one alone");
  const shown = segmentControls(2700, { from: 100, to: 130 }, 7, null, 2699);
  assert.deepEqual(shown.slice(0, 2), [7, 100]);
  assert.equal(shown[shown.length - 1], 2699);
  assert.equal(shown.length, 32, "the rows shown, the focused one and the playing one");
  assert.ok(segmentControls(5000, { from: 0, to: 5000 }).length <= MAX_SEGMENT_CONTROLS);
});

import assert from "node:assert/strict";
import { test } from "node:test";
import { RowHeights, rowsCovering } from "./virtual";

test("the rows covering a stretch of the list are found from their offsets", () => {
  // Rows of 10, 20, 30 and 40 px: starting at 0, 10, 30, 60; 100 in all.
  const offsets = [0, 10, 30, 60, 100];
  assert.deepEqual(rowsCovering(offsets, 0, 5), { from: 0, to: 1 });
  assert.deepEqual(rowsCovering(offsets, 10, 30), { from: 1, to: 2 });
  assert.deepEqual(rowsCovering(offsets, 15, 61), { from: 1, to: 4 });
  // Above the list and past its end: clamped, never empty.
  assert.deepEqual(rowsCovering(offsets, -500, -100), { from: 0, to: 1 });
  assert.deepEqual(rowsCovering(offsets, 500, 900), { from: 3, to: 4 });
  assert.deepEqual(rowsCovering([0], 0, 100), { from: 0, to: 0 });
});

test("measured rows move the offsets of those after them; unmeasured ones keep the estimate", () => {
  const heights = new RowHeights(5000, 80);
  assert.equal(heights.offsets()[5000], 400_000);
  assert.equal(heights.set(2, 120), true);
  assert.equal(heights.set(2, 120.2), false, "the same height within half a pixel");
  assert.equal(heights.set(9000, 10), false, "no such row");
  const offsets = heights.offsets();
  assert.equal(offsets[2], 160);
  assert.equal(offsets[3], 280);
  assert.equal(offsets[5000], 400_040);
  // The end of a three-hour transcript is found in a few steps, not a walk over every row.
  assert.deepEqual(rowsCovering(offsets, 399_000, 400_040), { from: 4987, to: 5000 });
  // A list that grows (a segment split) keeps what was measured.
  const grown = new RowHeights(5001, 80, heights);
  assert.equal(grown.offsets()[3], 280);
  assert.equal(grown.offsets()[5001], 400_120);
});

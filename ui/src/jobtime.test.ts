import assert from "node:assert/strict";
import { test } from "node:test";
import { formatStopwatch, setLocale } from "./i18n";
import { jobTimeText } from "./jobtime";

test("a running job shows its elapsed time, and the time left once it is known, in the window's language", () => {
  setLocale("en");
  assert.equal(jobTimeText(null), "");
  assert.equal(jobTimeText({ elapsed_secs: 62, remaining_secs: null }), "1:02 elapsed");
  assert.equal(jobTimeText({ elapsed_secs: 62, remaining_secs: 105 }), "1:02 elapsed · about 1:45 left");
  // Done: nothing left to estimate.
  assert.equal(jobTimeText({ elapsed_secs: 62, remaining_secs: 0 }), "1:02 elapsed");
  setLocale("de");
  assert.equal(jobTimeText({ elapsed_secs: 3723, remaining_secs: 7 }), "1:02:03 vergangen · noch etwa 0:07");
  setLocale("en");
});

test("the clock reads as the CLI's progress line does", () => {
  assert.equal(formatStopwatch(7.4), "0:07");
  assert.equal(formatStopwatch(725), "12:05");
  assert.equal(formatStopwatch(3723), "1:02:03");
  assert.equal(formatStopwatch(-3), "0:00");
  assert.equal(formatStopwatch(Number.POSITIVE_INFINITY), "0:00");
});

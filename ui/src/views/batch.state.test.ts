import { test } from "node:test";
import assert from "node:assert/strict";
import { batchServers, piecesPerServer } from "./batch.state.ts";

test("no server named: this machine's engine", () => {
  assert.equal(batchServers("", "4", true), null);
  assert.equal(batchServers(" \n\t\n", "", false), null);
});

test("one URL a line, trimmed, blank lines dropped; pieces per server only when given", () => {
  assert.deepEqual(batchServers(" http://a:1/v1 \n\nhttp://b:2/v1\n", "", false), {
    urls: ["http://a:1/v1", "http://b:2/v1"],
    per_server: null,
    allow_remote: false,
  });
  assert.deepEqual(batchServers("http://a:1/v1", " 3 ", true), {
    urls: ["http://a:1/v1"],
    per_server: 3,
    allow_remote: true,
  });
});

test("pieces per server is a whole number 1 to 64, or nothing (one)", () => {
  assert.equal(piecesPerServer(""), null);
  assert.equal(piecesPerServer(" 64 "), 64);
  for (const typed of ["0", "65", "70000", "1.5", "-3", "many", "1e2"]) {
    assert.equal(piecesPerServer(typed), undefined, typed);
  }
  // Not a choice the form sends: it does not start (the field says why).
  assert.equal(batchServers("http://a:1/v1", "1.5", false), null);
});

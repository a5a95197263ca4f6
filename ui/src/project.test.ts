import { test } from "node:test";
import assert from "node:assert/strict";
import { api, type Project, type ProjectSettings, type UiError } from "./api.ts";
import { editProject, saveProjectSettings, withSavedSegment } from "./project.ts";
import type { ProjectSegment } from "./bindings.ts";

const SETTINGS: ProjectSettings = {
  llm_cleanup: false,
  failure_policy: "reject",
  cleanup_mode: "cleanup",
  server_url: null,
  upstreams: [],
  remote_text_allowed: [],
  remote_audio_allowed: [],
  remote_voice_allowed: null,
  voice: null,
  speakers: "off",
} as unknown as ProjectSettings;

function project(settings: ProjectSettings, modified = 1): Project {
  return { id: "p", name: "P", modified_unix_ms: modified, settings, segments: [], speech: [] } as unknown as Project;
}

/** A shell holding the project's saved settings: a save whose `shown` is not what is saved is
 * refused as changed elsewhere, as the real one does. Counts the calls. */
function fakeShell(saved: ProjectSettings) {
  const shell = { saved, saves: 0, opens: 0, reloadFails: false };
  api.updateProjectSettings = async (_id, settings, shown) => {
    shell.saves += 1;
    if (JSON.stringify(shown) !== JSON.stringify(shell.saved)) {
      const refusal: UiError = {
        kind: "changed_elsewhere",
        message: "The project's settings were changed elsewhere; reloaded.",
        rejection: null,
        actions: [],
      };
      throw refusal;
    }
    shell.saved = settings;
    return project(settings, 2 + shell.saves);
  };
  api.openProject = async () => {
    shell.opens += 1;
    if (shell.reloadFails) throw { kind: "error", message: "disk gone", rejection: null, actions: [] };
    return project(shell.saved, 100 + shell.opens);
  };
  return shell;
}

test("a save sends the change over the settings shown and hands back the saved project", async () => {
  const shell = fakeShell(SETTINGS);
  const shown: Project[] = [];
  const p = await saveProjectSettings(project(SETTINGS), { voice: "kokoro-af" }, (p) => shown.push(p));
  assert.equal(p.settings.voice, "kokoro-af");
  assert.equal(shell.saved.voice, "kokoro-af");
  assert.equal(shell.saved.speakers, "off", "the other settings are kept");
  assert.deepEqual(shown, [p]);
  assert.equal(shell.opens, 0);
});

test("a stale view's save is refused, reloads, and the next change from the reload is saved", async () => {
  // Another window turned LLM cleanup on after this view loaded the project.
  const shell = fakeShell({ ...SETTINGS, llm_cleanup: true });
  let current = project(SETTINGS);
  const onProject = (p: Project) => {
    current = p;
  };
  await assert.rejects(
    saveProjectSettings(current, { voice: "kokoro-af" }, onProject),
    (e: UiError) => e.kind === "changed_elsewhere" && e.message.includes("changed elsewhere"),
  );
  assert.equal(shell.opens, 1, "the refusal reloads the project");
  assert.equal(current.settings.llm_cleanup, true, "the view now shows what is saved");
  assert.equal(shell.saved.voice, null, "the refused change was not saved");

  // The bug this fixes: without the reload every later change was refused as well.
  const p = await saveProjectSettings(current, { voice: "kokoro-af" }, onProject);
  assert.equal(p.settings.voice, "kokoro-af");
  assert.equal(p.settings.llm_cleanup, true, "the other window's change is kept");
  assert.equal(current, p);
  assert.equal(shell.saves, 2);
});

test("other refusals are thrown without a reload", async () => {
  fakeShell(SETTINGS);
  let opened = 0;
  api.openProject = async () => {
    opened += 1;
    return project(SETTINGS);
  };
  const shown: Project[] = [];
  await assert.rejects(
    editProject("p", () => Promise.reject(new Error("boom")), (p) => shown.push(p)),
    (e: UiError) => e.kind === "error" && e.message.includes("boom"),
  );
  assert.equal(opened, 0);
  assert.deepEqual(shown, []);
});

test("a failed reload still shows the refusal", async () => {
  const shell = fakeShell({ ...SETTINGS, llm_cleanup: true });
  shell.reloadFails = true;
  const shown: Project[] = [];
  await assert.rejects(
    saveProjectSettings(project(SETTINGS), { voice: "x" }, (p) => shown.push(p)),
    (e: UiError) => e.kind === "changed_elsewhere",
  );
  assert.equal(shell.opens, 1);
  assert.deepEqual(shown, []);
});

test("a typed edit's answer replaces its segment alone, in the project as it is now", () => {
  const segment = (text: string) => ({ start: 0, end: 1, text, suggestion: null, words: [] }) as unknown as ProjectSegment;
  const open = { ...project(SETTINGS, 10), segments: [segment("one"), segment("two")] } as Project;
  const saved = withSavedSegment(open, { index: 1, segment: segment("two, typed"), modified_unix_ms: 12 });
  assert.deepEqual(
    saved.segments.map((s) => s.text),
    ["one", "two, typed"],
  );
  assert.equal(saved.modified_unix_ms, 12);
  assert.equal(open.segments[1].text, "two", "the project shown before is not changed in place");
  assert.equal(saved.segments[0], open.segments[0], "the other segments are the same objects");
  // The transcript was replaced by a shorter one since: nothing to put it into.
  assert.equal(withSavedSegment(open, { index: 5, segment: segment("x"), modified_unix_ms: 13 }), open);
});

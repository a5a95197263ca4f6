// Changes to the open project that the shell refuses when the view is stale ("changed
// elsewhere": another window saved since this view loaded). Every view saves through these, so
// a refusal is handled one way everywhere: the project is reopened, the view shows what is
// saved now, and the next change is made from that (instead of being refused again and again
// until the project is reopened by hand).
import { api, asUiError, type Project, type ProjectSettings } from "./api";
import type { SegmentSaved } from "./bindings";

/** Runs `work`, an edit of project `id` as the view showed it, and hands the result to
 * `onProject`. Refused as changed elsewhere, the project is reopened and handed to `onProject`
 * before the refusal is thrown; every failure is thrown as a `UiError` for the view to show. */
export async function editProject(
  id: string,
  work: () => Promise<Project>,
  onProject: (p: Project) => void,
): Promise<Project> {
  let updated: Project;
  try {
    updated = await work();
  } catch (e) {
    const error = asUiError(e);
    if (error.kind === "changed_elsewhere") {
      try {
        onProject(await api.openProject(id));
      } catch {
        // The refusal says more than a failed reload; the next change is refused and retried.
      }
    }
    throw error;
  }
  onProject(updated);
  return updated;
}

/** Saves `change` to the project's settings as shown in `project` (see `editProject`). */
export function saveProjectSettings(
  project: Project,
  change: Partial<ProjectSettings>,
  onProject: (p: Project) => void,
): Promise<Project> {
  return editProject(
    project.id,
    () => api.updateProjectSettings(project.id, { ...project.settings, ...change }, project.settings),
    onProject,
  );
}

/** The project with a segment's text as saved (the answer to a typed edit: the segment alone,
 * not the whole project). A project whose transcript was replaced since has no such segment,
 * or another, and is left as it is. */
export function withSavedSegment(project: Project, saved: SegmentSaved): Project {
  if (saved.index >= project.segments.length) return project;
  const segments = project.segments.slice();
  segments[saved.index] = saved.segment;
  return { ...project, segments, modified_unix_ms: Math.max(project.modified_unix_ms, saved.modified_unix_ms) };
}

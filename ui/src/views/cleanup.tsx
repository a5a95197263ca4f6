// Clean up: per-project cleanup settings, streamed cleanup per segment, side-by-side diff,
// accept or reject per segment or all, and rejections shown at the segment they hit.
import { useEffect, useReducer, useRef, useState } from "preact/hooks";
import {
  api,
  asUiError,
  jobId,
  type Project,
  type ProjectSettings,
  type Segment,
  type TextDestination,
  type UiError,
} from "../api";
import { announce, focusWhenLost } from "../a11y";
import { wordDiff } from "../diff";
import { useEvent, useGuarded, useJob } from "../hooks";
import { saveProjectSettings } from "../project";
import { codeLabel, t, tr } from "../i18n";
import { ErrorNotice, textNote } from "../rejection";
import { VirtualList } from "../virtual";
import { ALL, initialState, reducer } from "./cleanup.state";
import { formatTime } from "./transcribe";

/** A row before it is measured: its head, the text and the suggestion beside it. */
const CLEANUP_ROW_PX = 110;

export function ProjectCleanupSettings(props: { project: Project; onProject: (p: Project) => void }) {
  const { project } = props;
  // The project's servers, space-separated: the first, then more behind the same text lane.
  const shownServers = () => [project.settings.server_url ?? "", ...project.settings.upstreams].join(" ").trim();
  const [serverUrl, setServerUrl] = useState(shownServers());
  const { error, setError, guard } = useGuarded();
  const [destination, setDestination] = useState<TextDestination | null>(null);
  useEffect(() => setServerUrl(shownServers()), [project.id, project.settings.server_url, project.settings.upstreams.join(" ")]);
  useEffect(() => {
    api.textDestination(project.id).then(setDestination, (e) => setError(asUiError(e)));
  }, [project.id, project.settings.server_url, project.settings.upstreams.join(" "), project.settings.remote_text_allowed.join(" ")]);
  // Saved elsewhere since this view loaded: the refusal is shown with what is there now.
  const save = (change: Partial<ProjectSettings>) =>
    guard(async () => {
      await saveProjectSettings(project, change, props.onProject);
    });
  const s = project.settings;
  return (
    <fieldset class="settings-box" data-testid="project-cleanup-settings">
      <legend>{t("cleanup.projectSettings")}</legend>
      <label class="toggle">
        <input
          type="checkbox"
          data-testid="setting-llm-cleanup"
          checked={s.llm_cleanup}
          onChange={(e) => save({ llm_cleanup: (e.target as HTMLInputElement).checked })}
        />
        {t("cleanup.useLlm")}
      </label>
      <span class="muted" data-testid="cleanup-privacy-note">
        {s.llm_cleanup ? t("cleanup.sent") : t("cleanup.off")}
      </span>
      {/* Always rendered, so the controls below do not move when the answer arrives. */}
      <div class="row" data-testid="text-destination" data-on-this-machine={String(destination?.on_this_machine ?? "")}>
        <span>
          {tr("cleanup.textGoesTo", { url: <code data-testid="text-destination-url">{destination?.url ?? "…"}</code> })}
          {destination && " "}
          {destination &&
            (destination.on_this_machine
              ? t("cleanup.thisMachine")
              : t("cleanup.anotherMachine", { host: destination.host }))}
        </span>
        {/* One consent for every server elsewhere that the project's text lane sends to. */}
        {destination && destination.origins.length > 0 && (
          <label class="toggle">
            <input
              type="checkbox"
              data-testid="setting-remote-consent"
              checked={destination.allowed}
              onChange={(e) =>
                save({
                  remote_text_allowed: (e.target as HTMLInputElement).checked ? destination.origins : [],
                })
              }
            />
            {t("cleanup.allowRemote", { host: destination.host })}
          </label>
        )}
      </div>
      <div class="row">
        <span class="labelled">
        <label for="failure-policy">{t("cleanup.whenRefused")}</label>
        <select
          id="failure-policy"
          data-testid="setting-failure-policy"
          value={s.failure_policy}
          onChange={(e) => save({ failure_policy: (e.target as HTMLSelectElement).value as ProjectSettings["failure_policy"] })}
        >
          <option value="reject">{t("policy.reject")}</option>
          <option value="fallback">{t("policy.fallback")}</option>
          <option value="retry">{t("policy.retry")}</option>
        </select>
        </span>
        <span class="labelled">
        <label for="cleanup-mode">{t("cleanup.mode")}</label>
        <select
          id="cleanup-mode"
          data-testid="setting-cleanup-mode"
          value={s.cleanup_mode}
          onChange={(e) => save({ cleanup_mode: (e.target as HTMLSelectElement).value as ProjectSettings["cleanup_mode"] })}
        >
          <option value="cleanup">{t("mode.cleanup")}</option>
          <option value="rewrite">{t("mode.rewrite")}</option>
        </select>
        </span>
      </div>
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          const [first, ...more] = serverUrl.trim().split(/\s+/).filter((u) => u !== "");
          save({ server_url: first ?? null, upstreams: first ? more : [] });
        }}
      >
        <label for="project-server-url" title={t("cleanup.serversTitle")}>
          {t("cleanup.servers")}
        </label>
        <input
          id="project-server-url"
          class="grow"
          data-testid="setting-server-url"
          value={serverUrl}
          placeholder={t("cleanup.serversPlaceholder")}
          onInput={(e) => setServerUrl((e.target as HTMLInputElement).value)}
        />
        <button type="submit" data-testid="setting-server-url-save">
          {t("cleanup.use")}
        </button>
      </form>
      {error && <ErrorNotice scope="project-settings" error={error} onDismiss={() => setError(null)} />}
    </fieldset>
  );
}

function Diff(props: { before: string; after: string; testid: string }) {
  return (
    <div class="diff" data-testid={props.testid}>
      {wordDiff(props.before, props.after).map((p, i) =>
        p.kind === "same" ? (
          <span key={i}>{p.text}</span>
        ) : p.kind === "removed" ? (
          <del key={i}>{p.text}</del>
        ) : (
          <ins key={i}>{p.text}</ins>
        ),
      )}
    </div>
  );
}

export function CleanupView(props: {
  project: Project;
  onProject: (p: Project) => void;
  onOpenSettings: () => void;
}) {
  const { project } = props;
  const [{ streams, running, errors, batch }, dispatch] = useReducer(reducer, initialState);
  // The clean-all job's id is also kept in a ref, set before the job starts: its first
  // segment may be refused (GPU pressure, a full lane) before the view renders again, and that
  // refusal must not be dropped as belonging to no job.
  const batchRef = useRef<string | null>(null);
  // Clean up all: one job, paused or cancelled as every view's are.
  const all = useJob("cleanup-all");

  useEvent("cleanup", (e) => {
    if (e.project !== project.id) return;
    if (e.event === "chunk_started" && e.attempt > 1) {
      dispatch({ type: "stream-restarted", index: e.segment });
    } else if (e.event === "delta") {
      dispatch({ type: "delta", index: e.segment, text: e.text });
    }
  });

  const cleanOne = async (index: number, rulesOnly = false): Promise<boolean> => {
    const job = jobId(`cleanup-${index}`);
    dispatch({ type: "segment-started", index, job });
    try {
      await api.cleanSegment(project.id, index, rulesOnly, job);
      props.onProject(await api.openProject(project.id));
      announce(t("announce.suggestion", { n: index + 1 }));
      return true;
    } catch (e) {
      dispatch({ type: "failed", index, error: asUiError(e) });
      return false;
    } finally {
      dispatch({ type: "segment-ended", index });
    }
  };

  // One job for the whole transcript, recorded in the project (a crash or a closed window
  // leaves it to resume). One segment at a time, so it never holds more than one text slot; a
  // refused segment shows its reason where it happened and the job goes on.
  const cleanAll = async () => {
    try {
      const summary = await all.runPausable((job) => {
        batchRef.current = job;
        dispatch({ type: "batch-started", job });
        return api.cleanAll(project.id, false, job);
      });
      // Paused: the suggestions made are kept, the rest waits under Interrupted jobs.
      if (summary === null) return;
      const count = (outcome: string) => summary.outcomes.filter((o) => o.outcome === outcome).length;
      announce(t("announce.cleanedAll", { cleaned: count("cleaned"), refused: count("refused") }));
    } catch (e) {
      dispatch({ type: "batch-failed", error: asUiError(e) });
    } finally {
      batchRef.current = null;
      dispatch({ type: "batch-ended" });
      props.onProject(await api.openProject(project.id));
    }
  };

  useEvent("cleanup-progress", (p) => {
    const current = batchRef.current;
    if (p.project !== project.id || !current) return;
    dispatch({ type: "batch-progress", job: current, index: p.segment, count: p.count, error: p.error });
    if (!p.error) {
      // The segment's suggestion is saved: show it now, not when the whole job ends.
      api.openProject(project.id).then(props.onProject, () => {});
    }
  });

  const decide = async (segment: number | null, decision: "accepted" | "rejected") => {
    try {
      props.onProject(await api.decide(project.id, segment, decision));
      announce(
        segment === null
          ? t("announce.decidedAll", { decision })
          : t("announce.decided", { decision, n: segment + 1 }),
      );
      // Accept all and Reject all disable themselves once nothing is pending.
      if (segment === null) focusWhenLost("cleanup-all");
    } catch (e) {
      dispatch({ type: "failed", index: segment ?? ALL, error: asUiError(e) });
    }
  };

  const pending = project.segments.filter((s) => s.suggestion?.decision === "pending").length;
  return (
    <div class="view" data-testid="view-cleanup">
      <h1 tabIndex={-1} data-testid="view-title">{t("nav.cleanup")}</h1>
      <ProjectCleanupSettings project={project} onProject={props.onProject} />
      {project.segments.length === 0 ? (
        <p class="muted" data-testid="cleanup-empty">
          {t("cleanup.empty")}
        </p>
      ) : (
        <>
          <div class="row">
            {batch ? (
              <>
                <button data-testid="cleanup-pause-all" onClick={all.pause}>
                  {t("common.pause")}
                </button>
                <button data-testid="cleanup-cancel-all" onClick={all.cancel}>
                  {t("cleanup.stop")}
                </button>
              </>
            ) : (
              <button data-testid="cleanup-all" onClick={cleanAll}>
                {t("cleanup.all")}
              </button>
            )}
            <button data-testid="cleanup-accept-all" disabled={pending === 0} onClick={() => decide(null, "accepted")}>
              {t("cleanup.acceptAll", { count: pending })}
            </button>
            <button data-testid="cleanup-reject-all" disabled={pending === 0} onClick={() => decide(null, "rejected")}>
              {t("cleanup.rejectAll")}
            </button>
          </div>
          {errors[ALL] && (
            <ErrorNotice scope="cleanup" error={errors[ALL]} onDismiss={() => dispatch({ type: "dismissed", index: ALL })} />
          )}
          <VirtualList
            testid="cleanup-list"
            class="cleanup-list"
            count={project.segments.length}
            estimate={CLEANUP_ROW_PX}
            row={(i) => (
              <CleanupRow
                key={i}
                index={i}
                segment={project.segments[i]}
                streaming={streams[i]}
                job={running[i]}
                error={errors[i]}
                onClean={(rulesOnly) => cleanOne(i, rulesOnly)}
                onDecide={(d) => decide(i, d)}
                onDismiss={() => dispatch({ type: "dismissed", index: i })}
                onOpenSettings={props.onOpenSettings}
              />
            )}
          />
        </>
      )}
    </div>
  );
}

function CleanupRow(props: {
  index: number;
  segment: Segment;
  streaming: string | undefined;
  job: string | undefined;
  error: UiError | undefined;
  onClean: (rulesOnly: boolean) => void;
  onDecide: (d: "accepted" | "rejected") => void;
  onDismiss: () => void;
  onOpenSettings: () => void;
}) {
  const { index: i, segment: s } = props;
  const sug = s.suggestion;
  return (
    <li class="cleanup-row" data-index={i} data-testid={`cleanup-row-${i}`}>
      <div class="cleanup-head">
        <span class="time">{formatTime(s.start)}</span>
        {props.job ? (
          <button data-testid={`cleanup-cancel-${i}`} onClick={() => api.cancelJob(props.job!)}>
            {t("common.cancel")}
          </button>
        ) : (
          <button data-testid={`cleanup-segment-${i}`} onClick={() => props.onClean(false)}>
            {t("cleanup.segment")}
          </button>
        )}
        {sug && (
          <>
            <span class={`badge source-${sug.source}`} data-testid={`cleanup-source-${i}`}>
              {codeLabel("source", sug.source)}
            </span>
            <span class={`badge decision-${sug.decision}`} data-testid={`cleanup-status-${i}`}>
              {codeLabel("decision", sug.decision)}
            </span>
            {/* Marked, not disabled, once chosen: the keyboard focus stays on the button
                pressed, and the state badge says what was decided. */}
            <button
              data-testid={`cleanup-accept-${i}`}
              aria-disabled={sug.decision === "accepted"}
              onClick={() => sug.decision !== "accepted" && props.onDecide("accepted")}
            >
              {t("cleanup.accept")}
            </button>
            <button
              data-testid={`cleanup-reject-${i}`}
              aria-disabled={sug.decision === "rejected"}
              onClick={() => sug.decision !== "rejected" && props.onDecide("rejected")}
            >
              {t("cleanup.reject")}
            </button>
          </>
        )}
      </div>
      <div class="side-by-side">
        <div class="original" data-testid={`cleanup-original-${i}`}>
          {s.text}
        </div>
        {props.streaming !== undefined ? (
          <div class="streaming" data-testid={`cleanup-streaming-${i}`} aria-live="polite">
            {props.streaming || <span class="muted">{t("cleanup.waiting")}</span>}
          </div>
        ) : sug ? (
          <div>
            <div class="cleaned" data-testid={`cleanup-suggestion-${i}`}>
              {sug.text}
            </div>
            <Diff before={s.text} after={sug.text} testid={`cleanup-diff-${i}`} />
            {sug.note && <div class="muted">{textNote(sug.note_code, sug.note)}</div>}
          </div>
        ) : (
          <div class="muted">{t("cleanup.notYet")}</div>
        )}
      </div>
      {props.error && (
        <ErrorNotice
          scope={`segment-${i}`}
          error={props.error}
          onRetry={() => props.onClean(false)}
          onRuleBased={() => props.onClean(true)}
          onCheckServer={props.onOpenSettings}
          onDismiss={props.onDismiss}
        />
      )}
    </li>
  );
}

// Transcribe: open, drop or record audio; progress and cancel; editable segments; export.
import { listen } from "@tauri-apps/api/event";
import { useCallback, useEffect, useMemo, useReducer, useRef, useState } from "preact/hooks";
import { api, asUiError, type Project, type Segment, type UiError, type VersionInfo } from "../api";
import type { ProjectSettings, SegmentSaved } from "../bindings";
import { announce, focusWhenLost } from "../a11y";
import { BrowseAudio } from "../files";
import { useEvent, useJob } from "../hooks";
import { JobTimeText } from "../jobtime";
import { editProject, saveProjectSettings } from "../project";
import { formatDateTime, formatNumber, formatPercent, t, tr } from "../i18n";
import { ErrorNotice } from "../rejection";
import { SpeakerLanes, usePlayer, Waveform } from "../waveform";
import { type Reveal, useRangeStore, VirtualList } from "../virtual";
import { EditPanel, useRecordingEdit, WordStrip } from "./edit";
import { displayName, speakerColor, speakerName, SpeakersPanel } from "./speakers";
import { formatTime, initialState, reducer, segmentsMatching } from "./transcribe.state";

/** The speakers choice: off, estimated, or how many. */
const SPEAKER_CHOICES = ["off", "auto", "2", "3", "4", "5", "6", "7", "8", "9", "10"];

/** How long a pause in typing saves a segment's edit. */
const EDIT_SAVE_DELAY_MS = 800;
/** A segment's row before it is measured: its times, two lines of text and its tools. */
const SEGMENT_ROW_PX = 84;

export { formatTime } from "./transcribe.state";

export function TranscribeView(props: {
  project: Project;
  onProject: (p: Project) => void;
  /** A typed edit of project `id` saved: its segment, to put into the project shown. */
  onSegmentSaved: (id: string, saved: SegmentSaved) => void;
}) {
  const { project } = props;
  // The segments whose rows are on screen, and a row asked to be brought there (search).
  const shown = useRangeStore();
  const [reveal, setReveal] = useState<Reveal | null>(null);
  // The match to select once its row is drawn.
  const focusFound = useRef<{ index: number; query: string } | null>(null);
  const [state, dispatch] = useReducer(reducer, initialState);
  const { path, progress, time, level, live, liveFinals, livePartial, error, format, exported, drafts } = state;
  const setPath = (path: string) => dispatch({ type: "path", path });
  const setError = (error: UiError | null) => dispatch({ type: "error", error });
  const transcription = useJob("transcribe");
  const recorder = useJob("record");
  const job = transcription.running;
  const recording = recorder.running;
  const player = usePlayer(project.id);
  // Editing the recording by its words: on by itself for a project with an edit.
  const [editing, setEditing] = useState(project.edit != null);
  useEffect(() => setEditing(project.edit != null), [project.id]);
  const recordingEdit = useRecordingEdit(project, props.onProject, editing);
  const playingIndex = player.playing === null ? null : Number(player.playing);

  useEvent("job-progress", (p) => {
    if (p.job === job) dispatch({ type: "progress", progress: p.progress, time: p.time });
  });
  useEvent("record-level", (p) => {
    if (p.job === recording) dispatch({ type: "level", dbfs: p.dbfs });
  });
  useEvent("live-transcript", (p) => {
    if (p.job === recording) dispatch({ type: "live-transcript", partial: p.partial, finals: p.finals });
  });
  // Files dropped on the window (Tauri's own event, not the shell's).
  useEffect(() => {
    const stop = listen<{ paths: string[] }>("tauri://drag-drop", (e) => {
      if (e.payload.paths?.length) setPath(e.payload.paths[0]);
    });
    return () => {
      stop.then((unlisten) => unlisten());
    };
  }, []);

  // Finding speakers and hearing fillers are the project's settings, saved as they are chosen
  // (refused, and reloaded, when another window changed the settings since this view loaded them).
  const chooseSetting = async (change: Partial<ProjectSettings>) => {
    setError(null);
    try {
      await saveProjectSettings(project, change, props.onProject);
    } catch (e) {
      setError(asUiError(e));
    }
  };

  // Start disables itself while the job runs: its focus goes to Cancel, and from there to the
  // first segment (or the refusal) when the job ends.
  const transcribe = async (file: string) => {
    dispatch({ type: "transcribe-started" });
    focusWhenLost("transcribe-cancel", "transcribe-start");
    try {
      const done = await transcription.runPausable((id) => api.transcribe(project.id, file, id));
      if (done === null) {
        // Paused: its checkpoint waits under Interrupted jobs, with Resume.
        focusWhenLost("transcribe-start");
        return;
      }
      props.onProject(done);
      announce(t("announce.transcribed", { count: done.segments.length }));
      focusWhenLost("segment-text-0", "transcribe-cancel");
    } catch (e) {
      setError(asUiError(e));
      focusWhenLost("rejection-transcribe", "transcribe-cancel");
    }
  };

  const record = async () => {
    dispatch({ type: "record-started" });
    focusWhenLost("record-stop", "record-start");
    let outcome;
    try {
      outcome = await recorder.run((id) => api.record(project.id, 600, live, id));
    } catch (e) {
      setError(asUiError(e));
      return;
    } finally {
      dispatch({ type: "record-stopped" });
      focusWhenLost("record-start", "record-stop");
    }
    // Transcribed while recording: that transcript is the project's now.
    dispatch({ type: "recorded", file: outcome.file, transcribed: !!outcome.project });
    if (outcome.project) {
      props.onProject(outcome.project);
      return;
    }
    await transcribe(outcome.file);
    // Shown after the fallback transcription, which clears errors as it starts.
    if (outcome.live_error) setError(outcome.live_error);
  };

  // Edits are saved as they are made: a short pause in typing saves, and so does leaving the
  // field. Until saved, the typed text is a draft, so a save that comes back while the user
  // is still typing never puts older text into the field.
  const timers = useRef<Record<number, ReturnType<typeof setTimeout>>>({});
  useEffect(() => () => Object.values(timers.current).forEach(clearTimeout), []);
  const saveSegment = async (index: number, text: string) => {
    clearTimeout(timers.current[index]);
    if (project.segments[index]?.text === text) return;
    try {
      props.onSegmentSaved(project.id, await api.editSegment(project.id, index, text));
      dispatch({ type: "draft-saved", index, text });
    } catch (e) {
      setError(asUiError(e));
    }
  };
  const typed = (index: number, text: string) => {
    dispatch({ type: "draft", index, text });
    clearTimeout(timers.current[index]);
    timers.current[index] = setTimeout(() => saveSegment(index, text), EDIT_SAVE_DELAY_MS);
  };

  // Stable across renders, so a keystroke draws no waveform or lane again.
  const latest = useRef({ project, player });
  latest.current = { project, player };
  const playSegment = useCallback((i: number) => {
    const { project, player } = latest.current;
    const s = project.segments[i];
    if (s) player.play(String(i), project.source_audio ?? "", s.start, s.end);
  }, []);
  const lanes = useMemo(
    () =>
      (project.speakers ?? []).map((sp) => ({
        id: sp.id,
        name: displayName(sp),
        segments: project.segments
          .map((s, index) => ({ index, start: s.start, end: s.end, speaker: s.speaker }))
          .filter((s) => s.speaker === sp.id),
      })),
    [project.speakers, project.segments],
  );

  return (
    <div class="view" data-testid="view-transcribe">
      <h1 tabIndex={-1} data-testid="view-title">{t("nav.transcribe")}</h1>
      <div class="drop-zone" data-testid="drop-zone">
        <form
          class="row"
          onSubmit={(e) => {
            e.preventDefault();
            transcribe(path);
          }}
        >
          <label for="audio-path">{t("transcribe.audioFile")}</label>
          <input
            id="audio-path"
            class="grow"
            data-testid="transcribe-path"
            value={path}
            placeholder={t("transcribe.placeholder")}
            onInput={(e) => setPath((e.target as HTMLInputElement).value)}
          />
          <BrowseAudio testid="transcribe-browse" onChosen={setPath} />
          <label for="transcribe-speakers">{t("transcribe.speakers")}</label>
          <select
            id="transcribe-speakers"
            data-testid="transcribe-speakers"
            value={project.settings.speakers}
            disabled={job !== null}
            title={t("transcribe.speakersTitle")}
            onChange={(e) => chooseSetting({ speakers: (e.target as HTMLSelectElement).value })}
          >
            {SPEAKER_CHOICES.map((c) => (
              <option key={c} value={c}>
                {c === "off"
                  ? t("transcribe.speakersOff")
                  : c === "auto"
                    ? t("transcribe.speakersAuto")
                    : t("transcribe.speakersCount", { count: Number(c) })}
              </option>
            ))}
          </select>
          <label class="check" title={t("transcribe.hearFillersTitle")}>
            <input
              type="checkbox"
              data-testid="transcribe-hear-fillers"
              checked={project.settings.hear_fillers}
              disabled={job !== null}
              onChange={(e) => chooseSetting({ hear_fillers: (e.target as HTMLInputElement).checked })}
            />
            {t("transcribe.hearFillers")}
          </label>
          <button type="submit" data-testid="transcribe-start" disabled={job !== null || path.trim() === ""}>
            {t("transcribe.start")}
          </button>
        </form>
        <div class="row">
          {recording === null ? (
            <>
              <button data-testid="record-start" onClick={record} disabled={job !== null}>
                {t("common.record")}
              </button>
              <label class="check">
                <input
                  type="checkbox"
                  data-testid="record-live"
                  checked={live}
                  onChange={(e) => dispatch({ type: "live", live: (e.target as HTMLInputElement).checked })}
                />
                {t("transcribe.live")}
              </label>
            </>
          ) : (
            <button data-testid="record-stop" onClick={recorder.cancel}>
              {t("transcribe.stopRecording")}
            </button>
          )}
          {level !== null && (
            <meter data-testid="record-level" min={-60} max={0} value={level} aria-label={t("transcribe.inputLevel")}>
              {t("unit.dbfs", { value: level.toFixed(0) })}
            </meter>
          )}
          <span class="muted">{t("transcribe.formats")}</span>
        </div>
        {(recording !== null || liveFinals.length > 0) && live && (
          <div class="live-transcript" data-testid="live-transcript" aria-live="polite">
            {liveFinals.map((line, i) => (
              <p key={i} data-testid={`live-final-${i}`}>
                <span class="time">{formatTime(line.start)}</span> {line.text}
              </p>
            ))}
            {livePartial && (
              <p class="muted" data-testid="live-partial">
                <span class="time">{formatTime(livePartial.start)}</span> {livePartial.text}…
              </p>
            )}
            {recording !== null && liveFinals.length === 0 && !livePartial && (
              <p class="muted" data-testid="live-waiting">
                {t("transcribe.listening")}
              </p>
            )}
          </div>
        )}
      </div>
      {job !== null && (
        <div class="row" data-testid="transcribe-running">
          <progress data-testid="transcribe-progress" max={1} value={progress} aria-label={t("transcribe.progress")} />
          <span>{formatPercent(progress)}</span>
          <JobTimeText time={time} testid="transcribe-time" />
          <button data-testid="transcribe-pause" onClick={transcription.pause}>
            {t("common.pause")}
          </button>
          <button data-testid="transcribe-cancel" onClick={transcription.cancel}>
            {t("common.cancel")}
          </button>
        </div>
      )}
      {error && (
        <ErrorNotice
          scope="transcribe"
          error={error}
          onRetry={path ? () => transcribe(path) : undefined}
          onDismiss={() => setError(null)}
        />
      )}
      {project.segments.length > 0 && (
        <>
          <div class="row">
            <span data-testid="transcript-summary">
              {[
                t("transcribe.segments", { count: project.segments.length }),
                formatTime(project.duration_secs),
                project.language,
                (project.speakers ?? []).length > 0 &&
                  t("transcribe.speakersCount", { count: (project.speakers ?? []).length }),
                project.source_audio,
              ]
                .filter((part) => !!part)
                .join(" · ")}
            </span>
            <span class="grow" />
            {project.source_audio && (
              <label class="check">
                <input
                  type="checkbox"
                  data-testid="edit-mode"
                  checked={editing}
                  onChange={(e) => setEditing((e.target as HTMLInputElement).checked)}
                />
                {t("transcribe.editMode")}
              </label>
            )}
            <label for="export-format">{t("transcribe.exportAs")}</label>
            <select
              id="export-format"
              data-testid="export-format"
              value={format}
              onChange={(e) => dispatch({ type: "format", format: (e.target as HTMLSelectElement).value })}
            >
              <option value="txt">TXT</option>
              <option value="srt">SRT</option>
              <option value="vtt">VTT</option>
              <option value="json">JSON</option>
            </select>
            <button
              data-testid="export-button"
              onClick={async () => {
                try {
                  const path = await api.exportTranscript(project.id, format);
                  dispatch({ type: "exported", path });
                  announce(t("common.savedPath", { path }));
                } catch (e) {
                  setError(asUiError(e));
                }
              }}
            >
              {t("transcribe.export")}
            </button>
          </div>
          {exported && (
            <p class="ok" data-testid="export-result">
              {tr("common.savedPath", { path: <code>{exported}</code> })}
            </p>
          )}
          <div class={(project.speakers ?? []).length > 0 ? "with-lanes" : undefined}>
            {project.source_audio && (
              <Waveform
                testid="transcribe-waveform"
                project={project.id}
                file={project.source_audio}
                regions={project.segments}
                playing={playingIndex}
                onRegion={playSegment}
                shown={shown}
                cuts={editing ? recordingEdit.cuts : undefined}
              />
            )}
            {lanes.length > 0 && (
              <SpeakerLanes
                testid="speaker-lanes"
                duration={project.duration_secs}
                lanes={lanes}
                playing={playingIndex}
                onRegion={playSegment}
                shown={shown}
              />
            )}
          </div>
          {player.error && <ErrorNotice scope="transcribe-play" error={player.error} onDismiss={player.clearError} />}
          {(project.speakers ?? []).length > 0 && <SpeakersPanel project={project} onProject={props.onProject} />}
          {editing && project.source_audio && <EditPanel project={project} edit={recordingEdit} />}
          <TranscriptSearch
            texts={() => project.segments.map((s, i) => drafts[i] ?? s.text)}
            onFound={(index, query) => {
              setReveal((r) => ({ index, seq: (r?.seq ?? 0) + 1 }));
              focusFound.current = { index, query };
            }}
          />
          <VirtualList
            testid="segment-list"
            class="segments"
            count={project.segments.length}
            estimate={SEGMENT_ROW_PX}
            reveal={reveal}
            rangeStore={shown}
            onRevealed={(index) => {
              const found = focusFound.current;
              if (found === null || found.index !== index) return;
              focusFound.current = null;
              const field = document.querySelector<HTMLTextAreaElement>(`[data-testid='segment-text-${index}']`);
              if (field === null) return;
              field.focus();
              const at = field.value.toLocaleLowerCase().indexOf(found.query.trim().toLocaleLowerCase());
              if (at >= 0) field.setSelectionRange(at, at + found.query.trim().length);
            }}
            row={(i) => {
              const s = project.segments[i];
              return (
                <li
                  key={i}
                  data-index={i}
                  data-testid={`segment-${i}`}
                  data-playing={playingIndex === i ? "true" : "false"}
                  data-last-played={player.last === String(i) ? "original" : ""}
                  class={playingIndex === i ? "playing" : undefined}
                >
                  <label class="time" for={editing ? undefined : `segment-text-${i}`} data-testid={`segment-time-${i}`}>
                    {formatTime(s.start)} – {formatTime(s.end)}
                  </label>
                  {editing ? (
                    <WordStrip project={project} index={i} segment={s} edit={recordingEdit} />
                  ) : (
                    <textarea
                      id={`segment-text-${i}`}
                      data-testid={`segment-text-${i}`}
                      rows={2}
                      value={drafts[i] ?? s.text}
                      onInput={(e) => typed(i, (e.target as HTMLTextAreaElement).value)}
                      onBlur={(e) => saveSegment(i, (e.target as HTMLTextAreaElement).value)}
                    />
                  )}
                  <SegmentSpeaker
                    project={project}
                    index={i}
                    segment={s}
                    onProject={props.onProject}
                    onError={setError}
                  />
                </li>
              );
            }}
          />
          <Versions project={project} onProject={props.onProject} />
        </>
      )}
    </div>
  );
}

/** Find in the transcript: Enter (or Next) goes to the next segment holding the text, Previous
 * back, each brought on screen with the text selected in it; "3 of 41" says where. The
 * segments are searched when asked, not as the view draws (a keystroke elsewhere costs none). */
function TranscriptSearch(props: { texts: () => string[]; onFound: (index: number, query: string) => void }) {
  const [query, setQuery] = useState("");
  // The last search: its query, how many segments hold it, and which of them (-1: none).
  const [at, setAt] = useState<{ query: string; count: number; match: number } | null>(null);
  const go = (step: 1 | -1) => {
    const matches = segmentsMatching(props.texts(), query);
    if (matches.length === 0) {
      setAt({ query, count: 0, match: -1 });
      return;
    }
    const from = at !== null && at.query === query ? at.match : step === 1 ? -1 : 0;
    const match = (((from + step) % matches.length) + matches.length) % matches.length;
    setAt({ query, count: matches.length, match });
    props.onFound(matches[match], query);
  };
  const status =
    at === null || at.query !== query || query.trim() === ""
      ? ""
      : at.match < 0
        ? t("transcribe.searchNone")
        : t("transcribe.searchFound", { at: formatNumber(at.match + 1), count: formatNumber(at.count) });
  return (
    <form
      class="row"
      role="search"
      data-testid="transcript-search-form"
      onSubmit={(e) => {
        e.preventDefault();
        go(1);
      }}
    >
      <label for="transcript-search">{t("transcribe.search")}</label>
      <input
        id="transcript-search"
        type="search"
        data-testid="transcript-search"
        value={query}
        onInput={(e) => setQuery((e.target as HTMLInputElement).value)}
      />
      <button type="submit" data-testid="transcript-search-next" disabled={query.trim() === ""}>
        {t("transcribe.searchNext")}
      </button>
      <button type="button" data-testid="transcript-search-previous" disabled={query.trim() === ""} onClick={() => go(-1)}>
        {t("transcribe.searchPrevious")}
      </button>
      <span data-testid="transcript-search-status" role="status">
        {status}
      </span>
    </form>
  );
}

/** The transcripts kept each time one was replaced wholesale, with Restore. */
function Versions(props: { project: Project; onProject: (p: Project) => void }) {
  const { project } = props;
  const [versions, setVersions] = useState<VersionInfo[]>([]);
  const [error, setError] = useState<UiError | null>(null);
  useEffect(() => {
    api.projectVersions(project.id).then(setVersions, (e) => setError(asUiError(e)));
  }, [project.id, project.modified_unix_ms]);
  if (versions.length === 0 && !error) return null;
  return (
    <details class="versions" data-testid="versions">
      <summary>{t("versions.summary", { count: versions.length })}</summary>
      <ul>
        {versions.map((v) => (
          <li key={v.id} class="row" data-testid={`version-${v.id}`}>
            <span class="grow">
              {t("versions.line", { saved: formatDateTime(v.saved_unix_ms), count: v.segments, reason: v.reason })}
            </span>
            <button
              data-testid={`version-restore-${v.id}`}
              onClick={async () => {
                setError(null);
                try {
                  props.onProject(await api.restoreVersion(project.id, v.id));
                } catch (e) {
                  setError(asUiError(e));
                }
              }}
            >
              {t("versions.restore")}
            </button>
          </li>
        ))}
      </ul>
      {error && <ErrorNotice scope="versions" error={error} onDismiss={() => setError(null)} />}
    </details>
  );
}

/** A segment's speaker (named, with their colour; another can be chosen) and Split: the new
 * part starts at the chosen word and may get another speaker. */
function SegmentSpeaker(props: {
  project: Project;
  index: number;
  segment: Segment;
  onProject: (p: Project) => void;
  onError: (e: UiError | null) => void;
}) {
  const { project, index: i, segment: s } = props;
  const [splitting, setSplitting] = useState(false);
  const [newSpeaker, setNewSpeaker] = useState("");
  // The words the split offers: the segment's timed words, asked for as the panel opens (the
  // window's projects carry none), else its text's.
  const [timed, setTimed] = useState<string[] | null>(null);
  const textWords = s.text.split(/\s+/).filter((w) => w !== "");
  const words = timed !== null && timed.length > 0 ? timed : textWords;
  const toggleSplit = async () => {
    if (splitting) {
      setSplitting(false);
      return;
    }
    try {
      setTimed((await api.segmentWords(project.id, i)).map((w) => w.text));
    } catch {
      setTimed(null); // the text's words, as the shell splits without timed ones
    }
    setSplitting(true);
  };
  const edit = async (work: () => Promise<Project>) => {
    props.onError(null);
    try {
      await editProject(project.id, work, props.onProject);
      setSplitting(false);
    } catch (e) {
      props.onError(asUiError(e));
    }
  };
  const name = speakerName(project, s.speaker);
  return (
    <div class="segment-tools">
      {(project.speakers ?? []).length > 0 && (
        <>
          <span class="segment-speaker" data-testid={`segment-speaker-name-${i}`}>
            {s.speaker && (
              <span class="swatch" style={{ background: speakerColor(project, s.speaker) }} aria-hidden="true" />
            )}
            {name ?? t("segment.noSpeaker")}
          </span>
          <select
            data-testid={`segment-speaker-${i}`}
            aria-label={t("segment.speakerOf", { n: i + 1 })}
            value={s.speaker ?? ""}
            onChange={(e) => {
              const v = (e.target as HTMLSelectElement).value;
              edit(() => api.setSegmentSpeaker(project.id, i, v === "" ? null : v, s));
            }}
          >
            <option value="">{t("segment.noSpeaker")}</option>
            {(project.speakers ?? []).map((sp) => (
              <option key={sp.id} value={sp.id}>
                {displayName(sp)}
              </option>
            ))}
            <option value="new">{t("segment.newSpeaker")}</option>
          </select>
        </>
      )}
      <button
        data-testid={`segment-split-${i}`}
        disabled={textWords.length < 2}
        aria-expanded={splitting}
        onClick={toggleSplit}
      >
        {t("segment.split")}
      </button>
      {splitting && (
        <div class="split-panel" data-testid={`segment-split-panel-${i}`}>
          {(project.speakers ?? []).length > 0 && (
            <label>
              {t("segment.newPartBy")}{" "}
              <select
                data-testid={`segment-split-speaker-${i}`}
                value={newSpeaker}
                onChange={(e) => setNewSpeaker((e.target as HTMLSelectElement).value)}
              >
                <option value="">{name ?? t("segment.sameSpeaker")}</option>
                {(project.speakers ?? [])
                  .filter((sp) => sp.id !== s.speaker)
                  .map((sp) => (
                    <option key={sp.id} value={sp.id}>
                      {displayName(sp)}
                    </option>
                  ))}
                <option value="new">{t("segment.newSpeaker")}</option>
              </select>
            </label>
          )}
          <span class="muted">
            {" "}
            {t("segment.splitBefore")}
          </span>
          <div class="split-words">
            {words.slice(1).map((w, k) => (
              <button
                key={k}
                data-testid={`segment-split-at-${i}-${k + 1}`}
                title={t("segment.splitBeforeWord", { word: w })}
                onClick={() =>
                  edit(() =>
                    api.splitSegment(
                      project.id,
                      i,
                      { at: "word", index: k + 1 },
                      newSpeaker === "" ? null : newSpeaker,
                      s,
                    ),
                  )
                }
              >
                | {w}
              </button>
            ))}
          </div>
        </div>
      )}
    </div>
  );
}

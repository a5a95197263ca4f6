// Editing the recording by its words (in the Transcribe view): select words and press Delete to
// cut them from the audio (again to bring them back), remove the fillers the cleanup rules
// find (each listed, to keep), shorten long pauses, undo and redo, hear the result from any
// word, export it and its cut list. The edit lives in the project (see the shell's
// `change_edit`); the original recording is never changed.
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { announce } from "../a11y";
import {
  api,
  asUiError,
  jobId,
  type EditChange,
  type EditSummary,
  type Project,
  type ProjectWord,
  type Segment,
  type UiError,
} from "../api";
import { useJob } from "../hooks";
import { formatNumber, t, tr } from "../i18n";
import { ErrorNotice } from "../rejection";
import { formatTime } from "./transcribe.state";
import {
  change,
  changed,
  changeTo,
  cutStretches,
  deleteChange,
  emptyHistory,
  type History,
  isSelected,
  moved,
  type Selection,
  selectionBounds,
  step,
  type WordAt,
  wordId,
} from "./edit.state";

/** What an edited export may be written as (the shell's `EditedFormat`). */
const EXPORT_FORMATS = ["wav", "flac", "mp3", "opus", "txt", "srt", "vtt", "json", "edl", "xmeml", "fcpxml", "otio"];
const CUT_LISTS = new Set(["edl", "xmeml", "fcpxml", "otio"]);
const FRAME_RATES = [24, 25, 30, 50, 60];
/** Fillers listed with a Keep button each; past them, a word is kept from the transcript
 * (selected, Delete), and the list stays quick to draw with thousands. */
const FILLERS_LISTED = 200;
/** The pause limit offered first, in seconds. */
const DEFAULT_PAUSE = 0.7;

/** Segments' timed words, fetched as their rows are drawn, a batch of rows at a time (one
 * reading of the project for the rows of a screen), and kept while the segment is the same
 * (its start and text): a change to the edit fetches none again. */
const segmentWords = new Map<string, ProjectWord[]>();
const SEGMENT_WORDS_KEPT = 4000;
/** Rows fetched together: a screen's worth and more. */
const WORDS_BATCH = 50;
/** Batches asked for and not answered yet, by project and first row. */
const batches = new Map<string, Promise<ProjectWord[][]>>();

function wordsKey(project: string, index: number, s: Segment): string {
  return `${project}\u0000${index}\u0000${s.start}\u0000${s.text}`;
}

/** The batch of rows holding `index`, asked for once however many of its rows ask. */
function wordsBatch(project: string, index: number): Promise<ProjectWord[][]> {
  const from = index - (index % WORDS_BATCH);
  const key = `${project}\u0000${from}`;
  let batch = batches.get(key);
  if (!batch) {
    batch = api.segmentsWords(project, from, WORDS_BATCH).finally(() => batches.delete(key));
    batches.set(key, batch);
  }
  return batch;
}

/** The timed words of segment `index`, once fetched (`null` until then). */
function useSegmentWords(project: Project, index: number, segment: Segment): ProjectWord[] | null {
  const key = wordsKey(project.id, index, segment);
  const [words, setWords] = useState<ProjectWord[] | null>(() => segmentWords.get(key) ?? null);
  const latest = useRef(project);
  latest.current = project;
  useEffect(() => {
    const kept = segmentWords.get(key);
    if (kept) {
      setWords(kept);
      return;
    }
    setWords(null);
    let current = true;
    wordsBatch(project.id, index).then(
      (rows) => {
        // Every row of the batch is kept, as the project shown has it now.
        const from = index - (index % WORDS_BATCH);
        rows.forEach((row, k) => {
          const s = latest.current.segments[from + k];
          if (s) segmentWords.set(wordsKey(project.id, from + k, s), row);
        });
        while (segmentWords.size > SEGMENT_WORDS_KEPT) segmentWords.delete(segmentWords.keys().next().value as string);
        if (current) setWords(rows[index - from] ?? []);
      },
      () => current && setWords([]),
    );
    return () => {
      current = false;
    };
  }, [key]);
  return words;
}

/** The selected words whose rows were drawn (their words fetched). */
function knownSelected(project: Project, s: Selection): WordAt[] {
  const [first, last] = selectionBounds(s);
  const known: WordAt[] = [];
  for (let segment = first.segment; segment <= last.segment; segment++) {
    const seg = project.segments[segment];
    const words = seg ? segmentWords.get(wordsKey(project.id, segment, seg)) : undefined;
    words?.forEach((_, word) => {
      if (isSelected(s, { segment, word })) known.push({ segment, word });
    });
  }
  return known;
}

/** Where the selection starts in the original, in seconds (its first word as transcribed). */
function selectionStart(project: Project, s: Selection | null): number {
  if (s === null) return 0;
  const [first] = selectionBounds(s);
  const seg = project.segments[first.segment];
  const words = seg ? segmentWords.get(wordsKey(project.id, first.segment, seg)) : undefined;
  return words?.[first.word]?.start ?? seg?.start ?? 0;
}

/** The edit of the open project's recording: its summary, the selection, and the changes. */
export function useRecordingEdit(project: Project, onProject: (p: Project) => void, enabled: boolean) {
  const [summary, setSummary] = useState<EditSummary | null>(null);
  const [selection, setSelection] = useState<Selection | null>(null);
  const [history, setHistory] = useState<History>(emptyHistory);
  const [error, setError] = useState<UiError | null>(null);
  const job = useJob("edit");
  const busy = job.running !== null;
  // The project shown, for the callbacks the rows hold.
  const latest = useRef({ project, summary, history, busy, selection });
  latest.current = { project, summary, history, busy, selection };

  // Read when the project is opened, and again when it was saved by something else (a
  // version restored, the transcript replaced).
  useEffect(() => {
    setHistory(emptyHistory);
    setSelection(null);
  }, [project.id]);
  useEffect(() => {
    if (!enabled) return;
    if (summary !== null && summary.modified_unix_ms === project.modified_unix_ms) return;
    let current = true;
    api.changeEdit(project.id, change({}), jobId("edit-read")).then(
      (read) => current && setSummary(read),
      (e) => current && setError(asUiError(e)),
    );
    return () => {
      current = false;
    };
  }, [project.id, project.modified_unix_ms, enabled]);

  /** Makes `asked`; the edit before it goes on the undo history unless `history` says where. */
  const apply = useCallback(
    async (asked: EditChange, history?: History): Promise<boolean> => {
      const { project, summary, busy } = latest.current;
      if (busy) return false;
      setError(null);
      const before = summary?.edit?.intent ?? null;
      try {
        const made = await job.run((id) => api.changeEdit(project.id, asked, id));
        setSummary(made);
        setHistory(history ?? changed(latest.current.history, before));
        onProject({ ...latest.current.project, edit: made.edit, modified_unix_ms: made.modified_unix_ms });
        announce(
          t("announce.editChanged", {
            cut: made.words_cut,
            edited: formatTime(made.edited_secs),
          }),
        );
        return true;
      } catch (e) {
        setError(asUiError(e));
        return false;
      }
    },
    [job.run, onProject],
  );

  const undoOrRedo = useCallback(
    (back: boolean) => {
      const { summary, history } = latest.current;
      const next = step(history, summary?.edit?.intent ?? null, back);
      if (next !== null) apply(changeTo(next.to), next.history);
    },
    [apply],
  );

  /** Delete: the selection is cut, or brought back when all of it is cut. */
  const deleteSelected = useCallback(() => {
    const { project, summary, selection } = latest.current;
    if (selection === null) return;
    apply(deleteChange(selection, knownSelected(project, selection), new Set(summary?.cut_ids ?? [])));
  }, [apply]);

  // Play edited: from the selected word (or the start) to the end, or Stop.
  const player = useJob("play-edited");
  const [playedFrom, setPlayedFrom] = useState<number | null>(null);
  const play = useCallback(async () => {
    const { project, selection } = latest.current;
    const from = selectionStart(project, selection);
    setPlayedFrom(from);
    setError(null);
    try {
      await player.run((id) => api.playEdited(project.id, from, id));
    } catch (e) {
      const error = asUiError(e);
      if (error.kind !== "cancelled") setError(error);
    }
  }, [player.run]);

  const cutIds = useMemo(() => new Set(summary?.cut_ids ?? []), [summary]);
  const cuts = useMemo(
    () => cutStretches(summary?.edit?.list, summary?.original_secs ?? project.duration_secs),
    [summary],
  );
  return {
    summary,
    cutIds,
    cuts,
    selection,
    setSelection,
    history,
    busy,
    cancel: job.cancel,
    error,
    setError,
    apply,
    undo: () => undoOrRedo(true),
    redo: () => undoOrRedo(false),
    deleteSelected,
    play,
    playing: player.running !== null,
    stop: player.cancel,
    playedFrom,
  };
}

export type RecordingEdit = ReturnType<typeof useRecordingEdit>;

function hasEdit(edit: RecordingEdit): boolean {
  return edit.summary?.edit != null;
}

/** Undo, redo and Delete by keyboard, wherever the edit's controls or words have the focus. */
export function editKeys(edit: RecordingEdit, e: KeyboardEvent): boolean {
  const mod = e.ctrlKey || e.metaKey;
  if (mod && !e.altKey && e.key.toLowerCase() === "z") {
    if (e.shiftKey) edit.redo();
    else edit.undo();
    return true;
  }
  if (mod && !e.altKey && e.key.toLowerCase() === "y") {
    edit.redo();
    return true;
  }
  return false;
}

/** The edit's controls: fillers, pauses, undo and redo, play, export, and what the edit is. */
export function EditPanel(props: { project: Project; edit: RecordingEdit }) {
  const { project, edit } = props;
  const { summary, busy } = edit;
  const intent = summary?.edit?.intent ?? null;
  const [pause, setPause] = useState(String(intent?.max_pause ?? DEFAULT_PAUSE));
  const [format, setFormat] = useState("wav");
  const [fps, setFps] = useState(30);
  const [exported, setExported] = useState<string | null>(null);
  const exporter = useJob("export-edited");
  useEffect(() => {
    if (intent?.max_pause) setPause(String(intent.max_pause));
  }, [intent?.max_pause]);
  const fillers = summary?.fillers ?? [];
  const pauseSecs = Number(pause.replace(",", "."));
  const pauseValid = Number.isFinite(pauseSecs) && pauseSecs >= 0.05 && pauseSecs <= 60;
  const hasEdit = summary?.edit != null;

  const exportEdited = async () => {
    edit.setError(null);
    setExported(null);
    try {
      const path = await exporter.run((id) => api.exportEdited(project.id, format, fps, id));
      setExported(path);
      announce(t("common.savedPath", { path }));
    } catch (e) {
      edit.setError(asUiError(e));
    }
  };

  return (
    <section
      class="edit-panel"
      data-testid="edit-panel"
      aria-label={t("edit.title")}
      onKeyDown={(e) => {
        // A field's own undo stays the field's.
        const field = (e.target as HTMLElement).closest("input, select, textarea");
        if (field === null && editKeys(edit, e)) e.preventDefault();
      }}
    >
      <p class="muted">{t("edit.hint")}</p>
      <div class="row">
        <button
          data-testid="edit-remove-fillers"
          aria-pressed={intent?.cut_fillers ?? false}
          disabled={busy || summary === null}
          onClick={() => edit.apply(change({ cut_fillers: !(intent?.cut_fillers ?? false) }))}
        >
          {t("edit.removeFillers", { count: fillers.length })}
        </button>
        <label for="edit-pause-limit">{t("edit.pauseLimit")}</label>
        <input
          id="edit-pause-limit"
          data-testid="edit-pause-limit"
          class="number"
          type="number"
          min={0.05}
          max={60}
          step={0.1}
          value={pause}
          aria-invalid={!pauseValid}
          onInput={(e) => setPause((e.target as HTMLInputElement).value)}
        />
        <button
          data-testid="edit-shorten-pauses"
          aria-pressed={intent?.max_pause != null}
          disabled={busy || summary === null || (!pauseValid && intent?.max_pause == null)}
          onClick={() =>
            edit.apply(
              change({ max_pause: intent?.max_pause != null && intent.max_pause === pauseSecs ? 0 : pauseSecs }),
            )
          }
        >
          {t("edit.shortenPauses")}
        </button>
        <label class="check">
          <input
            type="checkbox"
            data-testid="edit-room-tone"
            checked={intent?.room_tone ?? false}
            disabled={busy || summary === null}
            onChange={(e) => edit.apply(change({ room_tone: (e.target as HTMLInputElement).checked }))}
          />
          {t("edit.roomTone")}
        </label>
      </div>
      <div class="row">
        <button
          data-testid="edit-strike"
          disabled={busy || edit.selection === null}
          title={t("edit.strikeTitle")}
          onClick={edit.deleteSelected}
        >
          {t("edit.strike")}
        </button>
        <button
          data-testid="edit-undo"
          disabled={busy || edit.history.past.length === 0}
          title={t("edit.undoTitle")}
          onClick={edit.undo}
        >
          {t("edit.undo")}
        </button>
        <button
          data-testid="edit-redo"
          disabled={busy || edit.history.future.length === 0}
          title={t("edit.redoTitle")}
          onClick={edit.redo}
        >
          {t("edit.redo")}
        </button>
        {!edit.playing ? (
          <button
            data-testid="edit-play"
            data-played-from={edit.playedFrom === null ? "" : edit.playedFrom.toFixed(2)}
            disabled={!hasEdit}
            title={t("edit.playTitle")}
            onClick={edit.play}
          >
            {t("edit.play")}
          </button>
        ) : (
          <button data-testid="edit-stop" onClick={edit.stop}>
            {t("edit.stop")}
          </button>
        )}
        <button
          data-testid="edit-clear"
          disabled={busy || !hasEdit}
          onClick={() => edit.apply(change({ clear: true }))}
        >
          {t("edit.clear")}
        </button>
        {busy && (
          <>
            <span role="status" data-testid="edit-busy">
              {t("edit.busy")}
            </span>
            <button data-testid="edit-cancel" onClick={edit.cancel}>
              {t("common.cancel")}
            </button>
          </>
        )}
      </div>
      <p data-testid="edit-summary" data-words-cut={summary?.words_cut ?? 0} data-edited-secs={summary?.edited_secs ?? ""}>
        {summary === null
          ? t("edit.reading")
          : hasEdit
            ? t("edit.summary", {
                edited: formatTime(summary.edited_secs),
                original: formatTime(summary.original_secs),
                cut: summary.words_cut,
                joins: summary.joins,
              })
            : t("edit.none")}
      </p>
      {fillers.length > 0 && (
        <details class="edit-fillers" data-testid="edit-fillers">
          <summary>{t("edit.fillers", { count: fillers.length })}</summary>
          <ul>
            {fillers.slice(0, FILLERS_LISTED).map((f) => {
              const id = f.word.id.replace(":", "-");
              return (
                <li key={f.word.id} class="row" data-testid={`edit-filler-${id}`} data-cut={f.cut ? "true" : "false"}>
                  <span class="time">{formatTime(f.word.start)}</span>
                  {f.cut ? <del>{f.word.text}</del> : <span>{f.word.text}</span>}
                  <span class="muted">{t("edit.kind", { kind: f.kind })}</span>
                  <span class="grow" />
                  <button
                    data-testid={`edit-filler-toggle-${id}`}
                    disabled={busy}
                    aria-label={
                      f.cut
                        ? t("edit.keepWord", { word: f.word.text, time: formatTime(f.word.start) })
                        : t("edit.cutWord", { word: f.word.text, time: formatTime(f.word.start) })
                    }
                    onClick={() => edit.apply(change(f.cut ? { keep: [f.word.id] } : { strike: [f.word.id] }))}
                  >
                    {f.cut ? t("edit.keep") : t("edit.cut")}
                  </button>
                </li>
              );
            })}
          </ul>
          {fillers.length > FILLERS_LISTED && (
            <p class="muted" data-testid="edit-fillers-more">
              {t("edit.fillersMore", { count: fillers.length - FILLERS_LISTED })}
            </p>
          )}
        </details>
      )}
      <div class="row">
        <label for="edit-export-format">{t("edit.exportAs")}</label>
        <select
          id="edit-export-format"
          data-testid="edit-export-format"
          value={format}
          onChange={(e) => setFormat((e.target as HTMLSelectElement).value)}
        >
          {EXPORT_FORMATS.map((f) => (
            <option key={f} value={f}>
              {t("edit.format", { format: f })}
            </option>
          ))}
        </select>
        {CUT_LISTS.has(format) && (
          <>
            <label for="edit-export-fps">{t("edit.fps")}</label>
            <select
              id="edit-export-fps"
              data-testid="edit-export-fps"
              value={String(fps)}
              onChange={(e) => setFps(Number((e.target as HTMLSelectElement).value))}
            >
              {FRAME_RATES.map((r) => (
                <option key={r} value={String(r)}>
                  {formatNumber(r)}
                </option>
              ))}
            </select>
          </>
        )}
        {exporter.running === null ? (
          <button data-testid="edit-export" disabled={!hasEdit} onClick={exportEdited}>
            {t("edit.export")}
          </button>
        ) : (
          <button data-testid="edit-export-cancel" onClick={exporter.cancel}>
            {t("common.cancel")}
          </button>
        )}
      </div>
      {exported && (
        <p class="ok" data-testid="edit-export-result">
          {tr("common.savedPath", { path: <code>{exported}</code> })}
        </p>
      )}
      {edit.error && <ErrorNotice scope="edit" error={edit.error} onDismiss={() => edit.setError(null)} />}
    </section>
  );
}

/** A segment's words as the edit has them: click (Shift+click to extend) or arrows (Shift to
 * extend) select, Delete cuts or brings back, Enter plays the edit from the word. One Tab stop
 * per segment. */
export function WordStrip(props: {
  project: Project;
  index: number;
  segment: Segment;
  edit: RecordingEdit;
}) {
  const { project, index, edit } = props;
  const words = useSegmentWords(project, index, props.segment);
  const [active, setActive] = useState(0);
  const strip = useRef<HTMLDivElement>(null);
  if (words === null) return <div class="word-strip loading" data-testid={`segment-words-${index}`} aria-busy="true" />;
  if (words.length === 0)
    return (
      <p class="word-strip muted" data-testid={`segment-words-${index}`}>
        {props.segment.text} <span class="muted">({t("edit.noWords")})</span>
      </p>
    );
  const select = (word: number, extend: boolean) => {
    const at = { segment: index, word };
    const s = edit.selection;
    edit.setSelection(extend && s !== null ? { anchor: s.anchor, focus: at } : { anchor: at, focus: at });
  };
  const current = Math.min(active, words.length - 1);
  const onKeyDown = (e: KeyboardEvent) => {
    if (editKeys(edit, e)) {
      e.preventDefault();
      return;
    }
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === "Delete" || e.key === "Backspace") {
      e.preventDefault();
      edit.deleteSelected();
      return;
    }
    if (e.key === "Enter") {
      e.preventDefault();
      if (hasEdit(edit)) edit.play();
      return;
    }
    const to = moved(e.key, current, words.length);
    if (to === null) return;
    e.preventDefault();
    setActive(to);
    select(to, e.shiftKey);
    strip.current?.querySelector<HTMLElement>(`[data-word='${to}']`)?.focus();
  };
  return (
    <div
      ref={strip}
      class="word-strip"
      role="listbox"
      aria-multiselectable="true"
      aria-orientation="horizontal"
      aria-label={t("edit.words", { n: index + 1 })}
      data-testid={`segment-words-${index}`}
      onKeyDown={onKeyDown}
    >
      {words.map((w, k) => {
        const at = { segment: index, word: k };
        const id = wordId(at);
        const cut = edit.cutIds.has(id);
        const selected = isSelected(edit.selection, at);
        return (
          <span
            key={k}
            role="option"
            data-word={k}
            data-testid={`word-${index}-${k}`}
            data-cut={cut ? "true" : "false"}
            aria-selected={selected}
            tabIndex={k === current ? 0 : -1}
            class={`word${cut ? " cut" : ""}${selected ? " selected" : ""}`}
            title={`${formatTime(w.start)}${cut ? ` · ${t("edit.wordCut")}` : ""}`}
            onFocus={() => setActive(k)}
            onClick={(e) => {
              setActive(k);
              select(k, e.shiftKey);
            }}
          >
            {cut ? <del>{w.text.trim()}</del> : w.text.trim()}
          </span>
        );
      })}
    </div>
  );
}

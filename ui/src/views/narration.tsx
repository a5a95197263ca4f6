// Narration: clean up, rewrite or translate each segment on the text lane, speak it in the
// chosen voice, fit it to its segment's time, and lay out the narration with subtitles. The
// timeline shows every segment's state as it changes (refusals with their reason), plays a
// segment of the original or of the narration (A/B), re-runs one segment, and exports.
import { useEffect, useMemo, useReducer } from "preact/hooks";
import { api, asUiError, type FailurePolicy, type NarrationMode, type NarrationSummary, type Project, type SegmentState } from "../api";
import { announce, focusWhenLost } from "../a11y";
import { chooseSaveCopyPath } from "../files";
import { useEvent, useJob, useGuarded } from "../hooks";
import { formatNumber, formatSeconds, languageName, t, tr } from "../i18n";
import { ErrorNotice, reasonLabel, textNote, voiceNote } from "../rejection";
import { useRangeStore, VirtualList } from "../virtual";
import { usePlayer, Waveform } from "../waveform";
import { formatTime } from "./transcribe";
import { speakerColor, speakerName } from "./speakers";
import { VoiceConsent } from "./consent";
import { initialState, narrationOptions, reducer, type Side } from "./narration.state";

/** What a finished narration did, in a line (shown, and announced). */
function narrationSummary(summary: NarrationSummary): string {
  return [
    t("narration.summary", {
      narrated: summary.narrated,
      segments: summary.segments,
      redone: summary.worked_on,
      unchanged: summary.unchanged,
      seconds: formatSeconds(summary.timings.total_secs),
    }),
    summary.refused.length > 0 && t("narration.refused", { count: summary.refused.length }),
    summary.overflowed.length > 0 && t("narration.overflowed", { count: summary.overflowed.length }),
  ]
    .filter((part) => !!part)
    .join(" · ");
}

/** How a state reads on the timeline. */
function describe(state: SegmentState): string {
  switch (state.state) {
    case "waiting":
      return t("state.waiting");
    case "text_refused":
      return t("state.text_refused");
    case "text_done":
      return t("state.text_done");
    case "speech_refused":
      return t("state.speech_refused");
    case "synthesized":
      return t("state.synthesized");
    case "fitted":
      return t("state.fitted");
    case "overflow":
      return t("state.overflow", { seconds: formatSeconds(state.secs, 2) });
  }
}

/** A segment's row before it is measured: its head, and the text beside the narration's. */
const NARRATION_ROW_PX = 96;

export function NarrationView(props: { project: Project; onProject: (p: Project) => void }) {
  const { project } = props;
  // The segments whose rows are on screen (the waveform makes controls of those).
  const shown = useRangeStore();
  const [state, dispatch] = useReducer(reducer, project.settings, initialState);
  const { view, states, segments, languages, voices, progress, summary, side, exported } = state;
  const { mode, language, voice, policy, mix, speakerVoices } = state.choices;
  const { error, setError, guard } = useGuarded();
  const narration = useJob("narrate");
  const player = usePlayer(project.id);

  const load = async (restore = false) => dispatch({ type: "loaded", view: await api.narration(project.id), restore });
  useEffect(() => {
    // Opening the view: the choices are the last run's.
    load(true).catch((e) => setError(asUiError(e)));
    api.narrationLanguages().then(
      (languages) => dispatch({ type: "languages-loaded", languages }),
      (e) => setError(asUiError(e)),
    );
    api.listVoices().then(
      (voices) => dispatch({ type: "voices-loaded", voices }),
      (e) => setError(asUiError(e)),
    );
  }, [project.id]);

  useEvent("narration", (e) => {
    if (e.project !== project.id) return;
    if (e.event === "planned") {
      dispatch({ type: "planned", count: e.to_do.length });
    } else if (e.event === "segment") {
      dispatch({ type: "segment", index: e.index, state: e.state, segment: e.segment, done: e.done, of: e.of });
    }
  });

  // `pressed` is the button that started it (Narrate, or a segment's re-run).
  const run = (pressed: string, work: (job: string) => Promise<NarrationSummary>) =>
    guard(async () => {
      dispatch({ type: "run-started" });
      // The pressed button disables itself while the narration runs: its focus goes to Cancel,
      // and when the run ends to the summary (a whole run) or back to the button (a re-run).
      const whole = pressed === "narration-start";
      focusWhenLost("narration-cancel", pressed);
      try {
        const summary = await narration.runPausable(work);
        // Paused: what it finished is kept, the rest waits under Interrupted jobs.
        if (summary === null) return;
        dispatch({ type: "run-finished", summary });
        announce(narrationSummary(summary));
        if (whole) focusWhenLost("narration-summary", "narration-cancel");
      } finally {
        dispatch({ type: "run-ended" });
        // Refused, cancelled or a re-run: back to the button pressed (a refusal is announced as
        // an alert).
        focusWhenLost(pressed, "narration-cancel");
        await load();
        props.onProject(await api.openProject(project.id));
      }
    });

  const start = () => run("narration-start", (job) => api.narrate(project.id, narrationOptions(state), job));

  const output = view?.narration?.output ?? null;
  const regions = useMemo(
    () =>
      project.segments.map((s, i) => ({
        start: s.start,
        end: s.end,
        state: states[i]?.state,
        label: states[i] ? describe(states[i]) : undefined,
      })),
    [project.segments, states],
  );
  const playSegment = (i: number, which: Side) => {
    const s = project.segments[i];
    const take = segments[i]?.take;
    if (which === "narration" && output && take) {
      return player.play(`narration-${i}`, output.wav, s.start, s.start + take.secs);
    }
    return player.play(`original-${i}`, project.source_audio ?? "", s.start, s.end);
  };
  const playingIndex = (() => {
    const m = player.playing?.match(/^(original|narration)-(\d+)$/);
    return m ? Number(m[2]) : null;
  })();
  const busy = narration.running !== null;

  if (project.segments.length === 0) {
    return (
      <div class="view" data-testid="view-narration">
        <h1 tabIndex={-1} data-testid="view-title">{t("nav.narration")}</h1>
        <p class="muted" data-testid="narration-empty">
          {t("narration.empty")}
        </p>
      </div>
    );
  }
  return (
    <div class="view" data-testid="view-narration">
      <h1 tabIndex={-1} data-testid="view-title">{t("nav.narration")}</h1>
      <div class="row">
        <span class="labelled">
        <label for="narration-mode">{t("narration.text")}</label>
        <select
          id="narration-mode"
          data-testid="narration-mode"
          value={mode}
          onChange={(e) => dispatch({ type: "mode", mode: (e.target as HTMLSelectElement).value as NarrationMode })}
        >
          <option value="cleanup">{t("narration.mode.cleanup")}</option>
          <option value="rewrite">{t("narration.mode.rewrite")}</option>
          <option value="translate">{t("narration.mode.translate")}</option>
        </select>
        {mode === "translate" && (
          <select
            data-testid="narration-language"
            aria-label={t("narration.language")}
            value={language}
            onChange={(e) => dispatch({ type: "language", language: (e.target as HTMLSelectElement).value })}
          >
            {languages
              .filter((l) => l.code !== (project.language ?? "en"))
              .map((l) => (
                <option key={l.code} value={l.code}>
                  {languageName(l.code, l.name)}
                </option>
              ))}
          </select>
        )}
        </span>
        <span class="labelled">
        <label for="narration-voice">{t("narration.voice")}</label>
        <select
          id="narration-voice"
          data-testid="narration-voice"
          value={voice}
          onChange={(e) => dispatch({ type: "voice", voice: (e.target as HTMLSelectElement).value })}
        >
          <option value="">{t("narration.projectVoice")}</option>
          {voices.map((v) => (
            <option key={v.id} value={v.id}>
              {v.name} [{v.id}]
            </option>
          ))}
        </select>
        </span>
        <span class="labelled">
        <label for="narration-policy">{t("narration.whenRefused")}</label>
        <select
          id="narration-policy"
          data-testid="narration-policy"
          value={policy}
          onChange={(e) => dispatch({ type: "policy", policy: (e.target as HTMLSelectElement).value as FailurePolicy })}
        >
          <option value="reject">{t("narration.policy.reject")}</option>
          <option value="fallback">{t("narration.policy.fallback")}</option>
          <option value="retry">{t("narration.policy.retry")}</option>
        </select>
        </span>
        <label>
          <input
            type="checkbox"
            data-testid="narration-mix"
            checked={mix}
            onChange={(e) => dispatch({ type: "mix", mix: (e.target as HTMLInputElement).checked })}
          />{" "}
          {t("narration.mix")}
        </label>
        <button data-testid="narration-start" disabled={busy} onClick={start}>
          {t("narration.start")}
        </button>
        {busy && (
          <>
            <button data-testid="narration-pause" onClick={narration.pause}>
              {t("common.pause")}
            </button>
            <button data-testid="narration-cancel" onClick={narration.cancel}>
              {t("common.cancel")}
            </button>
          </>
        )}
      </div>
      {view && view.speakers.length > 0 && (
        <div class="speaker-voices" data-testid="narration-speaker-voices">
          {view.speakers.map((v) => (
            <div class="row" key={v.speaker} data-testid={`narration-speaker-${v.speaker}`}>
              <span class="swatch" style={{ background: speakerColor(project, v.speaker) }} aria-hidden="true" />
              <label for={`narration-speaker-voice-${v.speaker}`} class="speaker-name">
                {v.name}
              </label>
              <select
                id={`narration-speaker-voice-${v.speaker}`}
                data-testid={`narration-speaker-voice-${v.speaker}`}
                value={speakerVoices[v.speaker] ?? ""}
                onChange={(e) =>
                  dispatch({ type: "speaker-voice", speaker: v.speaker, voice: (e.target as HTMLSelectElement).value })
                }
              >
                <option value="">
                  {v.source === "chosen"
                    ? t("narration.defaultVoice")
                    : v.source === "profile"
                      ? t("narration.profileVoice", { voice: v.voice })
                      : t("narration.defaultIs", { voice: v.voice })}
                </option>
                {voices.map((voice) => (
                  <option key={voice.id} value={voice.id}>
                    {voice.name} [{voice.id}]
                  </option>
                ))}
              </select>
              <span class="muted" data-testid={`narration-speaker-current-${v.speaker}`}>
                {t("narration.now", { voice: v.voice })}
              </span>
            </div>
          ))}
        </div>
      )}
      <VoiceConsent project={project} voice={voice === "" ? project.settings.voice : voice} onProject={props.onProject} />
      {view && !view.llm && (
        <p class="muted" data-testid="narration-llm-off">
          {t("narration.llmOff")}
        </p>
      )}
      {progress && (
        <div class="row" data-testid="narration-running">
          <progress data-testid="narration-progress" max={Math.max(progress.of, 1)} value={progress.done} />
          <span>
            {t("narration.progress", { done: progress.done, of: progress.of })}
          </span>
        </div>
      )}
      {error && <ErrorNotice scope="narration" error={error} onDismiss={() => setError(null)} />}
      {player.error && <ErrorNotice scope="narration-play" error={player.error} onDismiss={player.clearError} />}
      {summary && (
        <p class={summary.refused.length > 0 ? "notice warn" : "ok"} data-testid="narration-summary" tabIndex={-1}>
          {narrationSummary(summary)}
        </p>
      )}
      {view?.narration?.voice_note && (
        <p class="muted" data-testid="narration-voice-note">
          {voiceNote(view.narration.voice_note_code, view.narration.voice_note)}
        </p>
      )}
      {project.source_audio && (
        <>
          <div class="row">
            <span>{t("narration.clickToPlay")}</span>
            <div class="segmented" role="radiogroup" aria-label={t("narration.play")}>
              {(["original", "narration"] as Side[]).map((s) => (
                <label key={s}>
                  <input
                    type="radio"
                    name="narration-side"
                    data-testid={`narration-ab-${s}`}
                    checked={side === s}
                    disabled={s === "narration" && !output}
                    onChange={() => dispatch({ type: "side", side: s })}
                  />{" "}
                  {s === "original" ? t("narration.sideOriginal") : t("narration.sideNarration")}
                </label>
              ))}
            </div>
          </div>
          <Waveform
            testid="narration-waveform"
            project={project.id}
            file={project.source_audio}
            regions={regions}
            playing={playingIndex}
            onRegion={(i) => playSegment(i, side)}
            shown={shown}
          />
        </>
      )}
      <VirtualList
        testid="narration-segments"
        class="segments narration"
        count={project.segments.length}
        estimate={NARRATION_ROW_PX}
        rangeStore={shown}
        row={(i) => {
          const s = project.segments[i];
          const state = states[i] ?? ({ state: "waiting" } as SegmentState);
          const n = segments[i];
          return (
            <li
              key={`${i}-${s.start}`}
              data-index={i}
              data-testid={`narration-segment-${i}`}
              data-state={state.state}
              data-playing={playingIndex === i ? "true" : "false"}
              data-last-played={player.last?.endsWith(`-${i}`) ? player.last.split("-")[0] : ""}
              class={playingIndex === i ? "playing" : undefined}
            >
              <div class="row">
                <span class="time">
                  {formatTime(s.start)} – {formatTime(s.end)}
                </span>
                {s.speaker && (
                  <span class="segment-speaker" data-testid={`narration-segment-speaker-${i}`}>
                    <span class="swatch" style={{ background: speakerColor(project, s.speaker) }} aria-hidden="true" />
                    {speakerName(project, s.speaker)}
                  </span>
                )}
                {n?.take?.voice && (
                  <span class="muted" data-testid={`narration-take-voice-${i}`}>
                    {n.take.voice}
                  </span>
                )}
                <span class={`badge ${state.state}`} data-testid={`narration-state-${i}`}>
                  {describe(state)}
                </span>
                {(state.state === "text_refused" || state.state === "speech_refused") && (
                  <span class="error-text" data-testid={`narration-reason-${i}`} title={state.message}>
                    {reasonLabel(state.reason)}: {state.message}
                  </span>
                )}
                <span class="grow" />
                {n?.take && (
                  <span class="muted" data-testid={`narration-fit-${i}`}>
                    {t("narration.fit", {
                      natural: formatSeconds(n.take.natural_secs),
                      secs: formatSeconds(n.take.secs),
                      rate: formatNumber(n.take.rate, 2),
                    })}
                  </span>
                )}
                <button data-testid={`narration-play-original-${i}`} onClick={() => playSegment(i, "original")}>
                  {t("narration.playA")}
                </button>
                <button
                  data-testid={`narration-play-take-${i}`}
                  disabled={!output || !n?.take}
                  onClick={() => playSegment(i, "narration")}
                >
                  {t("narration.playB")}
                </button>
                <button
                  data-testid={`narration-rerun-${i}`}
                  disabled={busy || !view?.narration}
                  title={t("narration.rerun")}
                  aria-label={t("narration.rerun")}
                  onClick={() => run(`narration-rerun-${i}`, (job) => api.narrateSegment(project.id, i, job))}
                >
                  ↻
                </button>
              </div>
              <div class="pair">
                <p class="muted">{s.suggestion?.decision === "accepted" ? s.suggestion.text : s.text}</p>
                <p data-testid={`narration-text-${i}`}>{n?.text ?? ""}</p>
              </div>
              {n?.note && (
                <p class="muted" data-testid={`narration-note-${i}`}>
                  {textNote(n.note_code, n.note)}
                </p>
              )}
            </li>
          );
        }}
      />
      {output && (
        <div class="output" data-testid="narration-output">
          <h2>{t("narration.output")}</h2>
          <div class="row">
            <button
              data-testid="narration-play-all"
              onClick={() => player.play("all", output.wav, 0, output.duration_secs)}
            >
              {t("narration.playAll")}
            </button>
            {output.mix && (
              <button
                data-testid="narration-play-mix"
                onClick={() => player.play("mix", output.mix ?? "", 0, output.duration_secs)}
              >
                {t("narration.playMix")}
              </button>
            )}
            {player.playing && <span data-testid="narration-playing">{t("narration.playing")}</span>}
            <button
              data-testid="narration-export"
              onClick={() =>
                guard(async () => {
                  const chosen = await chooseSaveCopyPath(output.wav, "narration.wav");
                  if (chosen) {
                    const path = await api.saveCopy(project.id, output.wav, chosen);
                    dispatch({ type: "exported", path });
                    announce(t("common.savedPath", { path }));
                  }
                })
              }
            >
              {t("narration.export")}
            </button>
          </div>
          <ul data-testid="narration-files">
            {[output.wav, output.mix, output.srt, output.vtt]
              .filter((f): f is string => !!f)
              .map((f) => (
                <li key={f}>
                  <code>{f}</code>
                </li>
              ))}
          </ul>
          {exported && (
            <p class="ok" data-testid="narration-exported">
              {tr("common.savedPath", { path: <code>{exported}</code> })}
            </p>
          )}
        </div>
      )}
    </div>
  );
}

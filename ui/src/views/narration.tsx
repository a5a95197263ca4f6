// Narration: clean up, rewrite or translate each segment on the text lane, speak it in the
// chosen voice, fit it to its segment's time, and lay out the narration with subtitles. The
// timeline shows every segment's state as it changes (refusals with their reason), plays a
// segment of the original or of the narration (A/B), re-runs one segment, and exports.
import { useEffect, useState } from "preact/hooks";
import {
  api,
  asUiError,
  type FailurePolicy,
  type LanguageView,
  type NarratedSegment,
  type NarrationMode,
  type NarrationSummary,
  type NarrationView,
  type Project,
  type SegmentState,
  type Voice,
} from "../api";
import { chooseSaveCopyPath } from "../files";
import { useEvent, useJob, useGuarded } from "../hooks";
import { ErrorNotice } from "../rejection";
import { usePlayer, Waveform } from "../waveform";
import { formatTime } from "./transcribe";
import { speakerColor, speakerName } from "./speakers";
import { VoiceConsent } from "./consent";

/** How a state reads on the timeline. */
function describe(state: SegmentState): string {
  switch (state.state) {
    case "waiting":
      return "waiting";
    case "text_refused":
      return "text refused";
    case "text_done":
      return "text done";
    case "speech_refused":
      return "speech refused";
    case "synthesized":
      return "synthesized";
    case "fitted":
      return "fitted";
    case "overflow":
      return `overflow ${state.secs.toFixed(2)} s`;
  }
}

type Side = "original" | "narration";

export function NarrationView(props: { project: Project; onProject: (p: Project) => void }) {
  const { project } = props;
  const [view, setView] = useState<NarrationView | null>(null);
  const [states, setStates] = useState<SegmentState[]>([]);
  const [segments, setSegments] = useState<(NarratedSegment | null)[]>([]);
  const [languages, setLanguages] = useState<LanguageView[]>([]);
  const [voices, setVoices] = useState<Voice[]>([]);
  const last = view?.narration?.settings;
  const [mode, setMode] = useState<NarrationMode>(last?.mode ?? project.settings.cleanup_mode);
  const [language, setLanguage] = useState("es");
  const [voice, setVoice] = useState<string>("");
  const [policy, setPolicy] = useState<FailurePolicy>(project.settings.failure_policy);
  const [mix, setMix] = useState(false);
  // The voice chosen for each speaker ("" : their default, which the view names).
  const [speakerVoices, setSpeakerVoices] = useState<Record<string, string>>({});
  const [progress, setProgress] = useState<{ done: number; of: number } | null>(null);
  const [summary, setSummary] = useState<NarrationSummary | null>(null);
  const { error, setError, guard } = useGuarded();
  const [side, setSide] = useState<Side>("original");
  const [exported, setExported] = useState<string | null>(null);
  const narration = useJob("narrate");
  const player = usePlayer(project.id);

  const load = async () => {
    const v = await api.narration(project.id);
    setView(v);
    setStates(v.states);
    setSegments(v.narration?.segments ?? []);
    return v;
  };
  useEffect(() => {
    load().then((v) => {
      const s = v.narration?.settings;
      if (s) {
        setMode(s.mode);
        if (s.mode === "translate") setLanguage(s.language);
        setVoice(s.voice ?? "");
        setPolicy(s.policy);
        setMix(s.mix);
        setSpeakerVoices({ ...(s.speaker_voices ?? {}) });
      }
    }, (e) => setError(asUiError(e)));
    api.narrationLanguages().then(setLanguages, (e) => setError(asUiError(e)));
    api.listVoices().then(setVoices, (e) => setError(asUiError(e)));
  }, [project.id]);

  useEvent("narration", (e) => {
    if (e.project !== project.id) return;
    if (e.event === "planned") {
      setProgress({ done: 0, of: e.to_do.length });
    } else if (e.event === "segment") {
      setStates((s) => {
        const next = [...s];
        next[e.index] = e.state;
        return next;
      });
      // A synthesized take is not saved yet: keep the saved segment until it is.
      if (e.state.state !== "synthesized") {
        setSegments((s) => {
          const next = [...s];
          next[e.index] = e.segment;
          return next;
        });
      }
      setProgress({ done: e.done, of: e.of });
    }
  });


  const run = (work: (job: string) => Promise<NarrationSummary>) =>
    guard(async () => {
      setSummary(null);
      try {
        setSummary(await narration.run(work));
      } finally {
        setProgress(null);
        await load();
        props.onProject(await api.openProject(project.id));
      }
    });

  const start = () =>
    run((job) =>
      api.narrate(
        project.id,
        {
          mode,
          to: mode === "translate" ? language : null,
          voice: voice === "" ? null : voice,
          policy,
          mix,
          // Every speaker's choice, so one set back to its default is cleared too.
          speaker_voices: Object.fromEntries(
            (view?.speakers ?? []).map((v) => [v.speaker, speakerVoices[v.speaker] ?? ""]),
          ),
        },
        job,
      ),
    );

  const output = view?.narration?.output ?? null;
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
        <h1>Narration</h1>
        <p class="muted" data-testid="narration-empty">
          Transcribe the project's audio first: narration works segment by segment.
        </p>
      </div>
    );
  }
  return (
    <div class="view" data-testid="view-narration">
      <h1>Narration</h1>
      <div class="row">
        <label for="narration-mode">Text</label>
        <select
          id="narration-mode"
          data-testid="narration-mode"
          value={mode}
          onChange={(e) => setMode((e.target as HTMLSelectElement).value as NarrationMode)}
        >
          <option value="cleanup">Clean up</option>
          <option value="rewrite">Rewrite as narration</option>
          <option value="translate">Translate</option>
        </select>
        {mode === "translate" && (
          <select
            data-testid="narration-language"
            aria-label="Language"
            value={language}
            onChange={(e) => setLanguage((e.target as HTMLSelectElement).value)}
          >
            {languages
              .filter((l) => l.code !== (project.language ?? "en"))
              .map((l) => (
                <option key={l.code} value={l.code}>
                  {l.name}
                </option>
              ))}
          </select>
        )}
        <label for="narration-voice">Voice</label>
        <select
          id="narration-voice"
          data-testid="narration-voice"
          value={voice}
          onChange={(e) => setVoice((e.target as HTMLSelectElement).value)}
        >
          <option value="">The project's voice</option>
          {voices.map((v) => (
            <option key={v.id} value={v.id}>
              {v.name} [{v.id}]
            </option>
          ))}
        </select>
        <label for="narration-policy">When refused</label>
        <select
          id="narration-policy"
          data-testid="narration-policy"
          value={policy}
          onChange={(e) => setPolicy((e.target as HTMLSelectElement).value as FailurePolicy)}
        >
          <option value="reject">Flag the segment</option>
          <option value="fallback">Clean it by the rules</option>
          <option value="retry">Retry (bounded)</option>
        </select>
        <label>
          <input
            type="checkbox"
            data-testid="narration-mix"
            checked={mix}
            onChange={(e) => setMix((e.target as HTMLInputElement).checked)}
          />{" "}
          Mix over the original
        </label>
        <button data-testid="narration-start" disabled={busy} onClick={start}>
          Narrate
        </button>
        {busy && (
          <button data-testid="narration-cancel" onClick={narration.cancel}>
            Cancel
          </button>
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
                onChange={(e) => {
                  const chosen = (e.target as HTMLSelectElement).value;
                  setSpeakerVoices((all) => ({ ...all, [v.speaker]: chosen }));
                }}
              >
                <option value="">
                  {v.source === "chosen" ? "Default voice" : `${v.source === "profile" ? "Their voice profile" : "Default"}: ${v.voice}`}
                </option>
                {voices.map((voice) => (
                  <option key={voice.id} value={voice.id}>
                    {voice.name} [{voice.id}]
                  </option>
                ))}
              </select>
              <span class="muted" data-testid={`narration-speaker-current-${v.speaker}`}>
                now: {v.voice}
              </span>
            </div>
          ))}
        </div>
      )}
      <VoiceConsent project={project} voice={voice === "" ? project.settings.voice : voice} onProject={props.onProject} />
      {view && !view.llm && (
        <p class="muted" data-testid="narration-llm-off">
          LLM cleanup is off for this project: the rules clean the text and nothing leaves the machine. Rewriting
          and translating need the text model (turn it on in Clean up).
        </p>
      )}
      {progress && (
        <div class="row" data-testid="narration-running">
          <progress data-testid="narration-progress" max={Math.max(progress.of, 1)} value={progress.done} />
          <span>
            {progress.done} of {progress.of} segments
          </span>
        </div>
      )}
      {error && <ErrorNotice scope="narration" error={error} onDismiss={() => setError(null)} />}
      {player.error && <ErrorNotice scope="narration-play" error={player.error} onDismiss={player.clearError} />}
      {summary && (
        <p class={summary.refused.length > 0 ? "notice warn" : "ok"} data-testid="narration-summary">
          {summary.narrated} of {summary.segments} segments narrated ({summary.worked_on} redone, {summary.unchanged}{" "}
          unchanged) in {summary.timings.total_secs.toFixed(1)} s
          {summary.refused.length > 0 && ` · ${summary.refused.length} refused`}
          {summary.overflowed.length > 0 && ` · ${summary.overflowed.length} over their slot`}
        </p>
      )}
      {view?.narration?.voice_note && (
        <p class="muted" data-testid="narration-voice-note">
          {view.narration.voice_note}
        </p>
      )}
      {project.source_audio && (
        <>
          <div class="row">
            <span>Click a segment to play</span>
            <div class="segmented" role="radiogroup" aria-label="Play">
              {(["original", "narration"] as Side[]).map((s) => (
                <label key={s}>
                  <input
                    type="radio"
                    name="narration-side"
                    data-testid={`narration-ab-${s}`}
                    checked={side === s}
                    disabled={s === "narration" && !output}
                    onChange={() => setSide(s)}
                  />{" "}
                  {s === "original" ? "A: original" : "B: narration"}
                </label>
              ))}
            </div>
          </div>
          <Waveform
            testid="narration-waveform"
            project={project.id}
            file={project.source_audio}
            regions={project.segments.map((s, i) => ({
              start: s.start,
              end: s.end,
              state: states[i]?.state,
            }))}
            playing={playingIndex}
            onRegion={(i) => playSegment(i, side)}
          />
        </>
      )}
      <ol class="segments narration" data-testid="narration-segments">
        {project.segments.map((s, i) => {
          const state = states[i] ?? ({ state: "waiting" } as SegmentState);
          const n = segments[i];
          return (
            <li
              key={`${i}-${s.start}`}
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
                    {state.reason}: {state.message}
                  </span>
                )}
                <span class="grow" />
                {n?.take && (
                  <span class="muted" data-testid={`narration-fit-${i}`}>
                    {n.take.natural_secs.toFixed(1)} s → {n.take.secs.toFixed(1)} s at {n.take.rate.toFixed(2)}×
                  </span>
                )}
                <button data-testid={`narration-play-original-${i}`} onClick={() => playSegment(i, "original")}>
                  ▶ A
                </button>
                <button
                  data-testid={`narration-play-take-${i}`}
                  disabled={!output || !n?.take}
                  onClick={() => playSegment(i, "narration")}
                >
                  ▶ B
                </button>
                <button
                  data-testid={`narration-rerun-${i}`}
                  disabled={busy || !view?.narration}
                  title="Narrate this segment again"
                  onClick={() => run((job) => api.narrateSegment(project.id, i, job))}
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
                  {n.note}
                </p>
              )}
            </li>
          );
        })}
      </ol>
      {output && (
        <div class="output" data-testid="narration-output">
          <h2>Narration</h2>
          <div class="row">
            <button
              data-testid="narration-play-all"
              onClick={() => player.play("all", output.wav, 0, output.duration_secs)}
            >
              ▶ Play narration
            </button>
            {output.mix && (
              <button
                data-testid="narration-play-mix"
                onClick={() => player.play("mix", output.mix ?? "", 0, output.duration_secs)}
              >
                ▶ Play mix
              </button>
            )}
            {player.playing && <span data-testid="narration-playing">Playing…</span>}
            <button
              data-testid="narration-export"
              onClick={() =>
                guard(async () => {
                  const chosen = await chooseSaveCopyPath(output.wav, "narration.wav");
                  if (chosen) setExported(await api.saveCopy(project.id, output.wav, chosen));
                })
              }
            >
              Export WAV…
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
              Saved <code>{exported}</code>
            </p>
          )}
        </div>
      )}
    </div>
  );
}

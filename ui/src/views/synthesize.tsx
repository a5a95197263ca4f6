// Synthesize: choose a voice, speak a segment or everything (accepted cleanups first), play,
// and save the WAV.
import { useEffect, useState } from "preact/hooks";
import { api, asUiError, jobId, type Project, type Voice } from "../api";
import { chooseSaveCopyPath } from "../files";
import { useJob, useGuarded } from "../hooks";
import { saveProjectSettings } from "../project";
import { ErrorNotice } from "../rejection";
import { VoiceConsent } from "./consent";

export function SynthesizeView(props: { project: Project; onProject: (p: Project) => void }) {
  const { project } = props;
  const [voices, setVoices] = useState<Voice[]>([]);
  const synthesis = useJob("synthesize");
  const job = synthesis.running;
  const { error, setError, guard } = useGuarded();
  const [saveTo, setSaveTo] = useState<Record<string, string>>({});
  const [saved, setSaved] = useState<Record<string, string>>({});

  useEffect(() => {
    api.listVoices().then(setVoices, (e) => setError(asUiError(e)));
  }, []);

  const speak = (segment: number | null) =>
    guard(async () => {
      await synthesis.run((id) => api.synthesize(project.id, segment, id));
      props.onProject(await api.openProject(project.id));
    });

  const speechText = (i: number) => {
    const s = project.segments[i];
    return s.suggestion?.decision === "accepted" ? s.suggestion.text : s.text;
  };

  const takes = [...project.speech].reverse();
  return (
    <div class="view" data-testid="view-synthesize">
      <h1>Synthesize</h1>
      <div class="row">
        <label for="voice">Voice</label>
        <select
          id="voice"
          data-testid="synth-voice"
          value={project.settings.voice ?? ""}
          onChange={(e) => {
            const v = (e.target as HTMLSelectElement).value;
            // Shared with every view that saves project settings: a "changed elsewhere"
            // refusal reloads the project, so the next choice is not refused again.
            guard(async () => {
              await saveProjectSettings(project, { voice: v === "" ? null : v }, props.onProject);
            });
          }}
        >
          <option value="">Default (espeak-ng)</option>
          {voices.map((v) => (
            <option key={v.id} value={v.id}>
              {v.name} [{v.id}]
            </option>
          ))}
        </select>
        <button data-testid="synth-all" disabled={job !== null || project.segments.length === 0} onClick={() => speak(null)}>
          Speak all
        </button>
        {job && (
          <button data-testid="synth-cancel" onClick={synthesis.cancel}>
            Cancel
          </button>
        )}
        {job && <span data-testid="synth-running">Synthesizing…</span>}
      </div>
      <VoiceConsent project={project} voice={project.settings.voice} onProject={props.onProject} />
      <p class="muted">Accepted cleanups are spoken instead of the raw transcript.</p>
      {error && <ErrorNotice scope="synthesize" error={error} onDismiss={() => setError(null)} />}
      <ol class="segments">
        {project.segments.map((_, i) => (
          <li key={i} class="row" data-testid={`synth-row-${i}`}>
            <button data-testid={`synth-segment-${i}`} disabled={job !== null} onClick={() => speak(i)}>
              Speak
            </button>
            <span class="grow" data-testid={`synth-text-${i}`}>
              {speechText(i)}
            </span>
          </li>
        ))}
      </ol>
      <h2>Takes</h2>
      {takes.length === 0 ? (
        <p class="muted" data-testid="synth-takes-empty">
          Nothing synthesized yet.
        </p>
      ) : (
        <ul class="takes" data-testid="synth-takes">
          {takes.map((t, n) => (
            <li key={t.file} data-testid={`synth-take-${n}`} data-file={t.file}>
              <div class="row">
                <code>{t.file}</code>
                <span class="muted">
                  {t.duration_secs.toFixed(1)} s · {t.segment === null ? "all" : `segment ${t.segment + 1}`} ·{" "}
                  {t.voice ?? "default voice"}
                  {t.voice_method && ` · ${t.voice_method}`}
                </span>
                {t.similarity !== null && t.default_similarity !== null && (
                  <span data-testid={`synth-similarity-${n}`}>
                    similarity {t.similarity.toFixed(3)} (search's embedder) ·{" "}
                    {t.similarity_independent === null
                      ? "independent: – (headroom models install resemblyzer)"
                      : `${t.similarity_independent.toFixed(3)} (independent: Resemblyzer)`}{" "}
                    (default voice {t.default_similarity.toFixed(3)}
                    {t.default_similarity_independent !== null && ` · ${t.default_similarity_independent.toFixed(3)}`})
                  </span>
                )}
                <button
                  data-testid={`synth-play-${n}`}
                  onClick={() => guard(() => api.play(project.id, t.file, jobId("play")))}
                >
                  ▶ Play
                </button>
              </div>
              <form
                class="row"
                onSubmit={(e) => {
                  e.preventDefault();
                  guard(async () => {
                    const path = await api.saveCopy(project.id, t.file, saveTo[t.file] ?? "");
                    setSaved((s) => ({ ...s, [t.file]: path }));
                  });
                }}
              >
                <label for={`save-${n}`}>Save WAV as</label>
                <input
                  id={`save-${n}`}
                  class="grow"
                  data-testid={`synth-save-path-${n}`}
                  placeholder="exports/narration.wav (in the project), or Choose…"
                  value={saveTo[t.file] ?? ""}
                  onInput={(e) => setSaveTo((s) => ({ ...s, [t.file]: (e.target as HTMLInputElement).value }))}
                />
                <button
                  type="button"
                  data-testid={`synth-save-browse-${n}`}
                  onClick={() =>
                    guard(async () => {
                      const chosen = await chooseSaveCopyPath(t.file, "take.wav");
                      if (chosen) setSaveTo((s) => ({ ...s, [t.file]: chosen }));
                    })
                  }
                >
                  Choose…
                </button>
                <button type="submit" data-testid={`synth-save-${n}`}>
                  Save
                </button>
              </form>
              {saved[t.file] && (
                <p class="ok" data-testid={`synth-saved-${n}`}>
                  Saved <code>{saved[t.file]}</code>
                </p>
              )}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

// Synthesize: choose a voice, speak a segment or everything (accepted cleanups first), play,
// and save the WAV.
import { announce, focusWhenLost } from "../a11y";
import { useEffect, useState } from "preact/hooks";
import { api, asUiError, jobId, type Project, type Voice } from "../api";
import { chooseSaveCopyPath } from "../files";
import { useJob, useGuarded } from "../hooks";
import { saveProjectSettings } from "../project";
import { formatNumber, formatSeconds, t, tr } from "../i18n";
import { ErrorNotice } from "../rejection";
import { VirtualList } from "../virtual";
import { VoiceConsent } from "./consent";

/** A row before it is measured: its Speak button and the text to be spoken. */
const SYNTH_ROW_PX = 44;

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

  // Every Speak disables itself while one runs: the focus goes to Cancel, then back to the
  // Speak pressed (or the refusal) when the take is ready.
  const speak = (segment: number | null) => {
    const pressed = segment === null ? "synth-all" : `synth-segment-${segment}`;
    focusWhenLost("synth-cancel", pressed);
    return guard(async () => {
      try {
        await synthesis.run((id) => api.synthesize(project.id, segment, id));
        props.onProject(await api.openProject(project.id));
        announce(t("announce.synthesized"));
      } finally {
        focusWhenLost(pressed, "synth-cancel");
      }
    });
  };

  const speechText = (i: number) => {
    const s = project.segments[i];
    return s.suggestion?.decision === "accepted" ? s.suggestion.text : s.text;
  };

  const takes = [...project.speech].reverse();
  return (
    <div class="view" data-testid="view-synthesize">
      <h1 tabIndex={-1} data-testid="view-title">{t("nav.synthesize")}</h1>
      <div class="row">
        <label for="voice">{t("synth.voice")}</label>
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
          <option value="">{t("synth.defaultVoiceOption")}</option>
          {voices.map((v) => (
            <option key={v.id} value={v.id}>
              {v.name} [{v.id}]
            </option>
          ))}
        </select>
        <button data-testid="synth-all" disabled={job !== null || project.segments.length === 0} onClick={() => speak(null)}>
          {t("synth.all")}
        </button>
        {job && (
          <button data-testid="synth-cancel" onClick={synthesis.cancel}>
            {t("common.cancel")}
          </button>
        )}
        {job && <span data-testid="synth-running">{t("synth.running")}</span>}
      </div>
      <VoiceConsent project={project} voice={project.settings.voice} onProject={props.onProject} />
      <p class="muted">{t("synth.acceptedNote")}</p>
      {error && <ErrorNotice scope="synthesize" error={error} onDismiss={() => setError(null)} />}
      <VirtualList
        testid="synth-list"
        class="segments"
        count={project.segments.length}
        estimate={SYNTH_ROW_PX}
        row={(i) => (
          <li key={i} class="row" data-index={i} data-testid={`synth-row-${i}`}>
            <button data-testid={`synth-segment-${i}`} disabled={job !== null} onClick={() => speak(i)}>
              {t("synth.speak")}
            </button>
            <span class="grow" data-testid={`synth-text-${i}`}>
              {speechText(i)}
            </span>
          </li>
        )}
      />
      <h2>{t("synth.takes")}</h2>
      {takes.length === 0 ? (
        <p class="muted" data-testid="synth-takes-empty">
          {t("synth.noTakes")}
        </p>
      ) : (
        <ul class="takes" data-testid="synth-takes">
          {takes.map((take, n) => (
            <li key={take.file} data-testid={`synth-take-${n}`} data-file={take.file}>
              <div class="row">
                <code>{take.file}</code>
                <span class="muted">
                  {[
                    formatSeconds(take.duration_secs),
                    take.segment === null ? t("synth.takeAll") : t("synth.takeSegment", { n: take.segment + 1 }),
                    take.voice ?? t("synth.defaultVoice"),
                    take.voice_method,
                  ]
                    .filter((part) => !!part)
                    .join(" · ")}
                </span>
                {take.similarity !== null && take.default_similarity !== null && (
                  <span data-testid={`synth-similarity-${n}`}>
                    {t("synth.similarity", {
                      search: formatNumber(take.similarity, 3),
                      independent:
                        take.similarity_independent === null
                          ? t("synth.noIndependent")
                          : t("sim.independent", { value: formatNumber(take.similarity_independent, 3) }),
                      default: [take.default_similarity, take.default_similarity_independent]
                        .filter((v): v is number => v !== null)
                        .map((v) => formatNumber(v, 3))
                        .join(" · "),
                    })}
                  </span>
                )}
                <button
                  data-testid={`synth-play-${n}`}
                  onClick={() => guard(() => api.play(project.id, take.file, jobId("play")))}
                >
                  {t("synth.play")}
                </button>
              </div>
              <form
                class="row"
                onSubmit={(e) => {
                  e.preventDefault();
                  guard(async () => {
                    const path = await api.saveCopy(project.id, take.file, saveTo[take.file] ?? "");
                    setSaved((s) => ({ ...s, [take.file]: path }));
                    announce(t("common.savedPath", { path }));
                  });
                }}
              >
                <label for={`save-${n}`}>{t("synth.saveAs")}</label>
                <input
                  id={`save-${n}`}
                  class="grow"
                  data-testid={`synth-save-path-${n}`}
                  placeholder={t("synth.savePlaceholder")}
                  value={saveTo[take.file] ?? ""}
                  onInput={(e) => setSaveTo((s) => ({ ...s, [take.file]: (e.target as HTMLInputElement).value }))}
                />
                <button
                  type="button"
                  data-testid={`synth-save-browse-${n}`}
                  onClick={() =>
                    guard(async () => {
                      const chosen = await chooseSaveCopyPath(take.file, "take.wav");
                      if (chosen) setSaveTo((s) => ({ ...s, [take.file]: chosen }));
                    })
                  }
                >
                  {t("synth.choose")}
                </button>
                <button type="submit" data-testid={`synth-save-${n}`}>
                  {t("common.save")}
                </button>
              </form>
              {saved[take.file] && (
                <p class="ok" data-testid={`synth-saved-${n}`}>
                  {tr("common.savedPath", { path: <code>{saved[take.file]}</code> })}
                </p>
              )}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

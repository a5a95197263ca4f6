// Voices: the voice library. Create a voice, add reference clips (each checked, with advice,
// and transcribed), search for an approximate voice match with progress, speak a test line and
// compare it with the reference (A/B), with similarity bars beside the default voice; choose
// and test the cloning server. A match is always called a match, never a clone.
import { announce } from "../a11y";
import { useEffect, useReducer } from "preact/hooks";
import { api, asUiError, jobId, type ClipReport, type VoiceProfile } from "../api";
import { BrowseAudio } from "../files";
import { useEvent, useJob, useGuarded } from "../hooks";
import { codeLabel, formatNumber, formatPercent, formatSeconds, t } from "../i18n";
import { ErrorNotice } from "../rejection";
import { initialState, reducer, selectedVoice, type Field } from "./voices.state";

/** A similarity by the search's embedder (the bar), and by the independent one (Resemblyzer's,
 * which the voice match never searched against) beside it. */
function Bar(props: { label: string; value: number; independent: number | null; testid: string }) {
  const width = Math.max(0, Math.min(1, props.value)) * 100;
  return (
    <div
      class="row"
      data-testid={props.testid}
      data-value={props.value.toFixed(3)}
      data-independent={props.independent === null ? "" : props.independent.toFixed(3)}
    >
      <span class="bar-label">{props.label}</span>
      <span class="bar">
        <span class="bar-fill" style={{ width: `${width}%` }} />
      </span>
      <span title={t("sim.searchTitle")}>{t("sim.search", { value: formatNumber(props.value, 3) })}</span>
      <span class="muted" title={t("sim.independentTitle")}>
        {"· "}
        {props.independent === null
          ? t("sim.noIndependent")
          : t("sim.independent", { value: formatNumber(props.independent, 3) })}
      </span>
    </div>
  );
}

function Report(props: { report: ClipReport; testid: string }) {
  const r = props.report;
  return (
    <div data-testid={props.testid}>
      <span class="muted">
        {t("voices.report", {
          seconds: formatSeconds(r.seconds),
          speech: formatNumber(r.speech_dbfs, 0),
          snr: formatNumber(r.snr_db, 0),
          clipped: formatPercent(r.clipped_fraction, 2),
          silence: formatPercent(r.silence_fraction, 0),
        })}
      </span>
      <ul>
        {r.findings.map((f) => (
          <li key={f.check} class={f.severity === "refused" ? "error" : "warning"} data-testid={`finding-${f.check}`}>
            {t("voices.finding", { severity: codeLabel("severity", f.severity), advice: f.advice })}
          </li>
        ))}
      </ul>
    </div>
  );
}

export function VoicesView() {
  const [state, dispatch] = useReducer(reducer, initialState);
  const { voices, selected, newName, rename, clipPath, refused, budget, progress } = state;
  const { line, take, transcripts, settings, health, level } = state;
  const { error, setError, guard } = useGuarded();
  const adding = useJob("voice-clip");
  const matching = useJob("voice-match");
  const speaking = useJob("voice-speak");
  const recorder = useJob("voice-record");
  useEvent("record-level", (p) => {
    if (p.job === recorder.running) dispatch({ type: "level", dbfs: p.dbfs });
  });
  useEvent("voice-match-progress", (p) => dispatch({ type: "match-progress", progress: p.progress }));

  const refresh = async () => dispatch({ type: "loaded", voices: await api.voiceProfiles() });
  useEffect(() => {
    refresh().catch((e) => setError(asUiError(e)));
    api.getSettings().then(
      (settings) => dispatch({ type: "settings-loaded", settings }),
      (e) => setError(asUiError(e)),
    );
  }, []);

  const voice = selectedVoice(state);
  const replace = (v: VoiceProfile) => dispatch({ type: "updated", voice: v });
  const typed = (field: Field) => (e: Event) => dispatch({ type: "typed", field, value: (e.target as HTMLInputElement).value });
  const current = voice?.matched && voice.matched.clip_ids.join() === voice.clips.map((c) => c.id).join() ? voice.matched : null;

  return (
    <div class="view" data-testid="view-voices">
      <h1 tabIndex={-1} data-testid="view-title">{t("nav.voices")}</h1>
      {error && <ErrorNotice scope="voices" error={error} onDismiss={() => setError(null)} />}
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          guard(async () => {
            const v = await api.createVoice(newName);
            dispatch({ type: "created", id: v.id });
            announce(t("announce.voiceCreated", { name: v.name }));
            await refresh();
          });
        }}
      >
        <label for="voice-name">{t("voices.new")}</label>
        <input id="voice-name" data-testid="voice-name" value={newName} onInput={typed("newName")} />
        <button type="submit" data-testid="voice-create" disabled={newName.trim() === ""}>
          {t("common.create")}
        </button>
      </form>
      {voices.length === 0 ? (
        <p class="muted" data-testid="voices-empty">
          {t("voices.empty")}
        </p>
      ) : (
        <ul class="voices" data-testid="voice-list">
          {voices.map((v) => (
            <li key={v.id}>
              <button
                data-testid={`voice-item-${v.id}`}
                class={v.id === selected ? "nav active" : "nav"}
                onClick={() => dispatch({ type: "selected", id: v.id })}
              >
                {t("voices.item", { name: v.name, count: v.clips.length })}
              </button>
            </li>
          ))}
        </ul>
      )}

      {voice && (
        <section data-testid="voice-detail">
          <h2 data-testid="voice-title">{voice.name}</h2>
          <form
            class="row"
            onSubmit={(e) => {
              e.preventDefault();
              guard(async () => {
                dispatch({ type: "renamed", voice: await api.renameVoice(voice.id, rename) });
              });
            }}
          >
            <input
              data-testid="voice-rename-input"
              placeholder={t("common.newName")}
              value={rename}
              onInput={typed("rename")}
            />
            <button type="submit" data-testid="voice-rename" disabled={rename.trim() === ""}>
              {t("common.rename")}
            </button>
          </form>
          <div class="row">
            <button
              data-testid="voice-delete"
              onClick={() =>
                guard(async () => {
                  await api.deleteVoice(voice.id);
                  dispatch({ type: "deleted" });
                  await refresh();
                })
              }
            >
              {t("voices.delete")}
            </button>
          </div>
          <h3>{t("voices.clips")}</h3>
          <form
            class="row"
            onSubmit={(e) => {
              e.preventDefault();
              guard(async () => {
                const result = await adding.run((job) => api.addVoiceClip(voice.id, clipPath, job));
                dispatch({ type: "clip-checked", result, fromPath: true });
              });
            }}
          >
            <label for="voice-clip-path">{t("voices.clip")}</label>
            <input
              id="voice-clip-path"
              class="grow"
              data-testid="voice-clip-path"
              placeholder={t("voices.clipPlaceholder")}
              value={clipPath}
              onInput={typed("clipPath")}
            />
            <BrowseAudio testid="voice-clip-browse" onChosen={(value) => dispatch({ type: "typed", field: "clipPath", value })} />
            <button type="submit" data-testid="voice-clip-add" disabled={adding.running !== null || clipPath.trim() === ""}>
              {adding.running ? t("common.checking") : t("voices.addClip")}
            </button>
            {recorder.running === null ? (
              <button
                type="button"
                data-testid="voice-record-start"
                disabled={adding.running !== null}
                onClick={() =>
                  guard(async () => {
                    dispatch({ type: "record-started" });
                    // Up to 30 s, the longest clip kept; Stop ends it sooner and keeps it.
                    const result = await recorder.run((job) => api.recordVoiceClip(voice.id, 30, job));
                    dispatch({ type: "clip-checked", result, fromPath: false });
                  })
                }
              >
                {t("common.record")}
              </button>
            ) : (
              <button type="button" data-testid="voice-record-stop" onClick={recorder.cancel}>
                {level !== null ? t("voices.stopLevel", { level: formatNumber(level, 0) }) : t("voices.stop")}
              </button>
            )}
          </form>
          {refused && (
            <div class="notice error" data-testid="voice-clip-refused">
              {t("voices.notAdded")}
              <Report report={refused} testid="voice-clip-refused-report" />
            </div>
          )}
          <ol>
            {voice.clips.map((c) => (
              <li key={c.id} data-testid={`voice-clip-${c.id}`}>
                <div class="row">
                  <code>{c.id}</code>
                  <button data-testid={`voice-clip-play-${c.id}`} onClick={() => guard(() => api.playVoiceFile(voice.id, c.file, jobId("play")))}>
                    {t("voices.playReference")}
                  </button>
                  <button
                    data-testid={`voice-clip-remove-${c.id}`}
                    onClick={() => guard(async () => replace(await api.removeVoiceClip(voice.id, c.id)))}
                  >
                    {t("voices.remove")}
                  </button>
                </div>
                <Report report={c.report} testid={`voice-clip-report-${c.id}`} />
                <form
                  class="row"
                  onSubmit={(e) => {
                    e.preventDefault();
                    guard(async () => replace(await api.setClipTranscript(voice.id, c.id, transcripts[c.id] ?? c.transcript ?? "")));
                  }}
                >
                  <input
                    class="grow"
                    aria-label={t("voices.clipTranscript", { clip: c.file })}
                    data-testid={`voice-clip-transcript-${c.id}`}
                    value={transcripts[c.id] ?? c.transcript ?? ""}
                    onInput={(e) => dispatch({ type: "transcript-typed", clip: c.id, value: (e.target as HTMLInputElement).value })}
                  />
                  <button type="submit" data-testid={`voice-clip-transcript-save-${c.id}`}>
                    {t("voices.saveTranscript")}
                  </button>
                </form>
              </li>
            ))}
          </ol>

          <h3>{t("voices.match")}</h3>
          <p class="muted">{t("voices.matchAbout")}</p>
          <div class="row">
            <label for="voice-budget">{t("voices.budget")}</label>
            <input
              id="voice-budget"
              type="number"
              min={1}
              data-testid="voice-match-budget"
              value={budget}
              onInput={(e) => dispatch({ type: "budget", value: Number((e.target as HTMLInputElement).value) || 1 })}
            />
            <button
              data-testid="voice-match"
              disabled={matching.running !== null || voice.clips.length === 0}
              onClick={() =>
                guard(async () => {
                  dispatch({ type: "match-started" });
                  replace(await matching.run((job) => api.matchVoice(voice.id, budget, job)));
                })
              }
            >
              {t("voices.find")}
            </button>
            {matching.running && (
              <button data-testid="voice-match-cancel" onClick={matching.cancel}>
                {t("common.cancel")}
              </button>
            )}
          </div>
          {matching.running && progress && (
            <div data-testid="voice-match-progress">
              <progress max={progress.total} value={progress.evaluations} />{" "}
              {t("voices.progress", {
                stage: codeLabel("match.stage", progress.stage),
                done: progress.evaluations,
                total: progress.total,
                best: formatNumber(progress.best_similarity, 3),
              })}
            </div>
          )}
          {current ? (
            <div data-testid="voice-match-result">
              <Bar
                label={t("voices.simDefault")}
                value={current.default_held_out.similarity}
                independent={current.default_held_out.similarity_independent}
                testid="voice-sim-default"
              />
              <Bar
                label={t("voices.simShipped", { style: current.outcome.best_shipped })}
                value={current.outcome.best_shipped_held_out.similarity}
                independent={current.outcome.best_shipped_held_out.similarity_independent}
                testid="voice-sim-shipped"
              />
              <Bar
                label={t("voices.simMatch")}
                value={current.outcome.held_out.similarity}
                independent={current.outcome.held_out.similarity_independent}
                testid="voice-sim-match"
              />
              {current.espeak && (
                <Bar
                  label={t("voices.simEspeak", { voice: current.espeak[0].voice, pitch: current.espeak[0].pitch })}
                  value={current.espeak[1].similarity}
                  independent={current.espeak[1].similarity_independent}
                  testid="voice-sim-espeak"
                />
              )}
              {current.outcome.held_out.similarity_independent === null && (
                <p class="muted" data-testid="voice-independent-hint">
                  {t("voices.independentHint")}
                </p>
              )}
              <p class="muted">
                {[
                  t("voices.onSearch", { value: formatNumber(current.outcome.search.similarity, 3) }),
                  current.outcome.search.similarity_independent !== null &&
                    t("sim.independent", { value: formatNumber(current.outcome.search.similarity_independent, 3) }),
                  t("voices.wer", { wer: formatNumber(current.outcome.held_out.word_error_rate, 2) }),
                  t("voices.takesIn", {
                    count: current.outcome.evaluations,
                    seconds: formatSeconds(current.outcome.seconds, 0),
                  }),
                ]
                  .filter((part) => !!part)
                  .join(" · ")}
              </p>
            </div>
          ) : (
            <p class="muted" data-testid="voice-match-none">
              {voice.matched ? t("voices.outOfDate") : t("voices.noMatch")}
            </p>
          )}

          <h3>{t("voices.try")}</h3>
          <form
            class="row"
            onSubmit={(e) => {
              e.preventDefault();
              guard(async () => dispatch({ type: "spoken", take: await speaking.run((job) => api.speakAsVoice(voice.id, line, job)) }));
            }}
          >
            <input class="grow" aria-label={t("voices.try")} data-testid="voice-line" value={line} onInput={typed("line")} />
            <button type="submit" data-testid="voice-speak" disabled={speaking.running !== null}>
              {speaking.running ? t("voices.speaking") : t("synth.speak")}
            </button>
          </form>
          {take && (
            <div data-testid="voice-take">
              <p data-testid="voice-take-method">{take.method}</p>
              <Bar
                label={t("voices.thisTake")}
                value={take.closeness.similarity}
                independent={take.closeness.similarity_independent}
                testid="voice-take-similarity"
              />
              <Bar
                label={t("voices.defaultVoiceOf", { voice: take.default_voice })}
                value={take.closeness.default_similarity}
                independent={take.closeness.default_similarity_independent}
                testid="voice-take-default"
              />
              {take.closeness.similarity_independent === null && <p class="muted">{t("voices.independentHint")}</p>}
              <div class="row">
                {voice.clips[0] && (
                  <button data-testid="voice-ab-reference" onClick={() => guard(() => api.playVoiceFile(voice.id, voice.clips[0].file, jobId("play")))}>
                    {t("voices.abReference")}
                  </button>
                )}
                <button data-testid="voice-ab-take" onClick={() => guard(() => api.playVoiceFile(voice.id, take.file, jobId("play")))}>
                  {t("voices.abTake")}
                </button>
              </div>
            </div>
          )}
        </section>
      )}

      <h2>{t("voices.cloning")}</h2>
      <p class="muted">{t("voices.cloningAbout")}</p>
      {settings && (
        <form
          class="row"
          onSubmit={(e) => {
            e.preventDefault();
            guard(async () => {
              await api.saveSettings(settings);
              dispatch({ type: "settings-saved" });
            });
          }}
        >
          <select
            aria-label={t("voices.cloningKind")}
            data-testid="cloning-kind"
            value={settings.cloning.kind}
            onChange={(e) =>
              dispatch({
                type: "settings-edited",
                settings: { ...settings, cloning: { ...settings.cloning, kind: (e.target as HTMLSelectElement).value } },
              })
            }
          >
            <option value="chatterbox">{t("cloning.chatterbox")}</option>
            <option value="xtts">{t("cloning.xtts")}</option>
            <option value="openai">{t("cloning.openai")}</option>
          </select>
          <input
            class="grow"
            data-testid="cloning-url"
            placeholder={t("voices.cloningPlaceholder")}
            value={settings.cloning.url}
            onInput={(e) =>
              dispatch({
                type: "settings-edited",
                settings: { ...settings, cloning: { ...settings.cloning, url: (e.target as HTMLInputElement).value } },
              })
            }
          />
          <button type="submit" data-testid="cloning-save">
            {t("common.save")}
          </button>
          <button type="button" data-testid="cloning-test" onClick={() => guard(async () => dispatch({ type: "health", health: await api.cloningHealth() }))}>
            {t("voices.test")}
          </button>
        </form>
      )}
      {health && (
        <p class="ok" data-testid="cloning-health">
          {health.url}: {health.detail}
        </p>
      )}
    </div>
  );
}

// Voices: the voice library. Create a voice, add reference clips (each checked, with advice,
// and transcribed), search for an approximate voice match with progress, speak a test line and
// compare it with the reference (A/B), with similarity bars beside the default voice; choose
// and test the cloning server. A match is always called a match, never a clone.
import { useEffect, useReducer } from "preact/hooks";
import { api, asUiError, jobId, type ClipReport, type VoiceProfile } from "../api";
import { BrowseAudio } from "../files";
import { useEvent, useJob, useGuarded } from "../hooks";
import { ErrorNotice } from "../rejection";
import { initialState, reducer, selectedVoice, type Field } from "./voices.state";

/** What to do when a score has no independent judge's number. */
const INDEPENDENT_HINT = "No independent score: install Resemblyzer's embedder with `headroom models install resemblyzer`.";

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
      <span title="cosine similarity by the speaker embedder the voice match searched against">
        {props.value.toFixed(3)} (search's embedder)
      </span>
      <span class="muted" title="cosine similarity by Resemblyzer's embedder, which the search never used">
        · {props.independent === null ? "independent: –" : `${props.independent.toFixed(3)} (independent: Resemblyzer)`}
      </span>
    </div>
  );
}

function Report(props: { report: ClipReport; testid: string }) {
  const r = props.report;
  return (
    <div data-testid={props.testid}>
      <span class="muted">
        {r.seconds.toFixed(1)} s · speech {r.speech_dbfs.toFixed(0)} dBFS · SNR {r.snr_db.toFixed(0)} dB · clipped{" "}
        {(r.clipped_fraction * 100).toFixed(2)}% · silence {(r.silence_fraction * 100).toFixed(0)}%
      </span>
      <ul>
        {r.findings.map((f) => (
          <li key={f.check} class={f.severity === "refused" ? "error" : "warning"} data-testid={`finding-${f.check}`}>
            {f.severity === "refused" ? "Refused" : "Warning"}: {f.advice}
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
      <h1>Voices</h1>
      {error && <ErrorNotice scope="voices" error={error} onDismiss={() => setError(null)} />}
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          guard(async () => {
            const v = await api.createVoice(newName);
            dispatch({ type: "created", id: v.id });
            await refresh();
          });
        }}
      >
        <label for="voice-name">New voice</label>
        <input id="voice-name" data-testid="voice-name" value={newName} onInput={typed("newName")} />
        <button type="submit" data-testid="voice-create" disabled={newName.trim() === ""}>
          Create
        </button>
      </form>
      {voices.length === 0 ? (
        <p class="muted" data-testid="voices-empty">
          No voices yet. Create one, then add 5–30 s clips of one person speaking.
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
                {v.name} ({v.clips.length} clips)
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
              placeholder="New name"
              value={rename}
              onInput={typed("rename")}
            />
            <button type="submit" data-testid="voice-rename" disabled={rename.trim() === ""}>
              Rename
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
              Delete voice
            </button>
          </div>
          <h3>Reference clips</h3>
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
            <label for="voice-clip-path">Clip</label>
            <input
              id="voice-clip-path"
              class="grow"
              data-testid="voice-clip-path"
              placeholder="/path/to/reference.wav (5–30 s of one person speaking)"
              value={clipPath}
              onInput={typed("clipPath")}
            />
            <BrowseAudio testid="voice-clip-browse" onChosen={(value) => dispatch({ type: "typed", field: "clipPath", value })} />
            <button type="submit" data-testid="voice-clip-add" disabled={adding.running !== null || clipPath.trim() === ""}>
              {adding.running ? "Checking…" : "Add clip"}
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
                ● Record
              </button>
            ) : (
              <button type="button" data-testid="voice-record-stop" onClick={recorder.cancel}>
                ■ Stop {level !== null && `(${level.toFixed(0)} dBFS)`}
              </button>
            )}
          </form>
          {refused && (
            <div class="notice error" data-testid="voice-clip-refused">
              The clip was not added.
              <Report report={refused} testid="voice-clip-refused-report" />
            </div>
          )}
          <ol>
            {voice.clips.map((c) => (
              <li key={c.id} data-testid={`voice-clip-${c.id}`}>
                <div class="row">
                  <code>{c.id}</code>
                  <button data-testid={`voice-clip-play-${c.id}`} onClick={() => guard(() => api.playVoiceFile(voice.id, c.file, jobId("play")))}>
                    ▶ Reference (A)
                  </button>
                  <button
                    data-testid={`voice-clip-remove-${c.id}`}
                    onClick={() => guard(async () => replace(await api.removeVoiceClip(voice.id, c.id)))}
                  >
                    Remove
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
                    data-testid={`voice-clip-transcript-${c.id}`}
                    value={transcripts[c.id] ?? c.transcript ?? ""}
                    onInput={(e) => dispatch({ type: "transcript-typed", clip: c.id, value: (e.target as HTMLInputElement).value })}
                  />
                  <button type="submit" data-testid={`voice-clip-transcript-save-${c.id}`}>
                    Save transcript
                  </button>
                </form>
              </li>
            ))}
          </ol>

          <h3>Voice match (approximate)</h3>
          <p class="muted">
            No cloning server needed: the embedded voices are searched for the one closest to these clips, judged on
            sentences the search never used. It is an approximation, not a clone.
          </p>
          <div class="row">
            <label for="voice-budget">Budget (takes)</label>
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
              Find voice match
            </button>
            {matching.running && (
              <button data-testid="voice-match-cancel" onClick={matching.cancel}>
                Cancel
              </button>
            )}
          </div>
          {matching.running && progress && (
            <div data-testid="voice-match-progress">
              <progress max={progress.total} value={progress.evaluations} /> {progress.stage}: {progress.evaluations} /{" "}
              {progress.total} takes, best {progress.best_similarity.toFixed(3)}
            </div>
          )}
          {current ? (
            <div data-testid="voice-match-result">
              <Bar
                label="Default voice"
                value={current.default_held_out.similarity}
                independent={current.default_held_out.similarity_independent}
                testid="voice-sim-default"
              />
              <Bar
                label={`Best shipped style (${current.outcome.best_shipped})`}
                value={current.outcome.best_shipped_held_out.similarity}
                independent={current.outcome.best_shipped_held_out.similarity_independent}
                testid="voice-sim-shipped"
              />
              <Bar
                label="Voice match (held out)"
                value={current.outcome.held_out.similarity}
                independent={current.outcome.held_out.similarity_independent}
                testid="voice-sim-match"
              />
              {current.espeak && (
                <Bar
                  label={`espeak-ng match (${current.espeak[0].voice}, pitch ${current.espeak[0].pitch})`}
                  value={current.espeak[1].similarity}
                  independent={current.espeak[1].similarity_independent}
                  testid="voice-sim-espeak"
                />
              )}
              {current.outcome.held_out.similarity_independent === null && (
                <p class="muted" data-testid="voice-independent-hint">
                  {INDEPENDENT_HINT}
                </p>
              )}
              <p class="muted">
                On the search sentence {current.outcome.search.similarity.toFixed(3)} (search's embedder)
                {current.outcome.search.similarity_independent !== null &&
                  ` · ${current.outcome.search.similarity_independent.toFixed(3)} (independent: Resemblyzer)`}{" "}
                · word error rate{" "}
                {current.outcome.held_out.word_error_rate.toFixed(2)} · {current.outcome.evaluations} takes in{" "}
                {current.outcome.seconds.toFixed(0)} s
              </p>
            </div>
          ) : (
            <p class="muted" data-testid="voice-match-none">
              {voice.matched ? "The match is out of date: the clips changed." : "No match yet."}
            </p>
          )}

          <h3>Try the voice</h3>
          <form
            class="row"
            onSubmit={(e) => {
              e.preventDefault();
              guard(async () => dispatch({ type: "spoken", take: await speaking.run((job) => api.speakAsVoice(voice.id, line, job)) }));
            }}
          >
            <input class="grow" data-testid="voice-line" value={line} onInput={typed("line")} />
            <button type="submit" data-testid="voice-speak" disabled={speaking.running !== null}>
              {speaking.running ? "Speaking…" : "Speak"}
            </button>
          </form>
          {take && (
            <div data-testid="voice-take">
              <p data-testid="voice-take-method">{take.method}</p>
              <Bar
                label="This take"
                value={take.closeness.similarity}
                independent={take.closeness.similarity_independent}
                testid="voice-take-similarity"
              />
              <Bar
                label={`Default voice (${take.default_voice})`}
                value={take.closeness.default_similarity}
                independent={take.closeness.default_similarity_independent}
                testid="voice-take-default"
              />
              {take.closeness.similarity_independent === null && <p class="muted">{INDEPENDENT_HINT}</p>}
              <div class="row">
                {voice.clips[0] && (
                  <button data-testid="voice-ab-reference" onClick={() => guard(() => api.playVoiceFile(voice.id, voice.clips[0].file, jobId("play")))}>
                    ▶ A: reference
                  </button>
                )}
                <button data-testid="voice-ab-take" onClick={() => guard(() => api.playVoiceFile(voice.id, take.file, jobId("play")))}>
                  ▶ B: take
                </button>
              </div>
            </div>
          )}
        </section>
      )}

      <h2>Cloning server</h2>
      <p class="muted">Real cloning runs on your own server (Chatterbox-TTS-API, the XTTS API server, or an OpenAI-style speech server).</p>
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
            data-testid="cloning-kind"
            value={settings.cloning.kind}
            onChange={(e) =>
              dispatch({
                type: "settings-edited",
                settings: { ...settings, cloning: { ...settings.cloning, kind: (e.target as HTMLSelectElement).value } },
              })
            }
          >
            <option value="chatterbox">Chatterbox-TTS-API</option>
            <option value="xtts">XTTS API server</option>
            <option value="openai">OpenAI-style speech server</option>
          </select>
          <input
            class="grow"
            data-testid="cloning-url"
            placeholder="http://127.0.0.1:4123 (empty: no cloning server)"
            value={settings.cloning.url}
            onInput={(e) =>
              dispatch({
                type: "settings-edited",
                settings: { ...settings, cloning: { ...settings.cloning, url: (e.target as HTMLInputElement).value } },
              })
            }
          />
          <button type="submit" data-testid="cloning-save">
            Save
          </button>
          <button type="button" data-testid="cloning-test" onClick={() => guard(async () => dispatch({ type: "health", health: await api.cloningHealth() }))}>
            Test
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

// Settings: the text model's server (test connection, model discovery), lane limits and
// deadlines, installed models.
import { useEffect, useState } from "preact/hooks";
import { api, asUiError, jobId, type AppInfo, type ModelView, type ServerInfo, type Settings, type UiError } from "../api";
import { useEvent } from "../hooks";
import { ErrorNotice } from "../rejection";

function NumberField(props: {
  id: string;
  label: string;
  value: number;
  step?: number;
  min?: number;
  onChange: (v: number) => void;
}) {
  return (
    <label class="field" for={props.id}>
      <span>{props.label}</span>
      <input
        id={props.id}
        data-testid={props.id}
        type="number"
        min={props.min ?? 0}
        step={props.step ?? 1}
        value={props.value}
        onInput={(e) => props.onChange(Number((e.target as HTMLInputElement).value))}
      />
    </label>
  );
}

export function SettingsView(props: { info: AppInfo | null; onSaved: () => void }) {
  const [settings, setSettings] = useState<Settings | null>(null);
  const [models, setModels] = useState<ModelView[]>([]);
  const [server, setServer] = useState<ServerInfo | null>(null);
  const [testing, setTesting] = useState(false);
  const [error, setError] = useState<UiError | null>(null);
  const [saved, setSaved] = useState(false);
  const [installing, setInstalling] = useState<{ name: string; job: string; step: string } | null>(null);

  useEvent("job-progress", (p) => {
    setInstalling((i) =>
      i && i.job === p.job ? { ...i, step: `${p.step ?? ""} (${Math.round(p.progress * 100)}%)` } : i,
    );
  });

  const install = async (name: string) => {
    const job = jobId("install");
    setInstalling({ name, job, step: "starting" });
    setError(null);
    try {
      await api.installModel(name, job);
      setModels(await api.models());
    } catch (e) {
      setError(asUiError(e));
    } finally {
      setInstalling(null);
    }
  };

  useEffect(() => {
    api.getSettings().then(setSettings, (e) => setError(asUiError(e)));
    api.models().then(setModels, (e) => setError(asUiError(e)));
  }, []);

  if (!settings) return <div class="view" data-testid="view-settings">Loading…</div>;
  const lane = settings.text_lane;
  const setLane = (change: Partial<Settings["text_lane"]>) => {
    setSaved(false);
    setSettings({ ...settings, text_lane: { ...lane, ...change } });
  };
  const setAudio = (change: Partial<Settings["audio_lane"]>) => {
    setSaved(false);
    setSettings({ ...settings, audio_lane: { ...settings.audio_lane, ...change } });
  };

  const test = async () => {
    setTesting(true);
    setError(null);
    setServer(null);
    try {
      setServer(await api.testConnection(settings.llm.url));
    } catch (e) {
      setError(asUiError(e));
    } finally {
      setTesting(false);
    }
  };

  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      await api.saveSettings(settings);
      setSaved(true);
      props.onSaved();
    } catch (err) {
      setError(asUiError(err));
    }
  };

  return (
    <form class="view" data-testid="view-settings" onSubmit={save}>
      <h1>Settings</h1>
      <fieldset class="settings-box">
        <legend>Text model server</legend>
        <div class="row">
          <label for="settings-server-url">Server URL</label>
          <input
            id="settings-server-url"
            class="grow"
            data-testid="settings-server-url"
            value={settings.llm.url}
            onInput={(e) => {
              setSaved(false);
              setSettings({ ...settings, llm: { ...settings.llm, url: (e.target as HTMLInputElement).value } });
            }}
          />
          <button type="button" data-testid="settings-test-connection" onClick={test} disabled={testing}>
            {testing ? "Testing…" : "Test connection"}
          </button>
        </div>
        {server && (
          <div class="ok" data-testid="settings-connection-result">
            Connected: {server.models.length} model{server.models.length === 1 ? "" : "s"}
            {server.context_tokens !== null && `, context ${server.context_tokens} tokens`}.
          </div>
        )}
        <div class="row">
          <label for="settings-model">Model</label>
          <select
            id="settings-model"
            data-testid="settings-model"
            value={settings.llm.model ?? ""}
            onChange={(e) => {
              const v = (e.target as HTMLSelectElement).value;
              setSettings({ ...settings, llm: { ...settings.llm, model: v === "" ? null : v } });
            }}
          >
            <option value="">The server's first model</option>
            {settings.llm.model && !server?.models.some((m) => m.id === settings.llm.model) && (
              <option value={settings.llm.model}>{settings.llm.model}</option>
            )}
            {server?.models.map((m) => (
              <option key={m.id} value={m.id} data-testid="settings-discovered-model">
                {m.id}
              </option>
            ))}
          </select>
        </div>
        <p class="muted">API keys are read from HEADROOM_API_KEY and never written by the app.</p>
      </fieldset>
      <fieldset class="settings-box">
        <legend>Text lane (admission control)</legend>
        <div class="grid">
          <NumberField id="settings-max-in-flight" label="In flight" min={1} value={lane.max_in_flight} onChange={(v) => setLane({ max_in_flight: v })} />
          <NumberField id="settings-max-waiting" label="Wait slots" value={lane.max_waiting} onChange={(v) => setLane({ max_waiting: v })} />
          <NumberField
            id="settings-context-tokens"
            label="Context tokens (0: ask the server)"
            value={lane.context_tokens ?? 0}
            onChange={(v) => setLane({ context_tokens: v > 0 ? v : null })}
          />
          <NumberField id="settings-max-input-chars" label="Max input characters" min={1} value={lane.max_input_chars} onChange={(v) => setLane({ max_input_chars: v })} />
          <NumberField id="settings-queue-wait" label="Queue wait (s)" step={0.5} value={lane.queue_wait_secs} onChange={(v) => setLane({ queue_wait_secs: v })} />
          <NumberField id="settings-first-chunk" label="First words within (s)" step={0.5} value={lane.first_chunk_secs} onChange={(v) => setLane({ first_chunk_secs: v })} />
          <NumberField id="settings-total" label="Whole request within (s)" step={1} value={lane.total_secs} onChange={(v) => setLane({ total_secs: v })} />
          <NumberField
            id="settings-audio-headroom"
            label="GPU memory kept for audio, MiB (0: off)"
            step={256}
            value={lane.audio_headroom_mib ?? 0}
            onChange={(v) => setLane({ audio_headroom_mib: v > 0 ? v : null })}
          />
          <label class="field" for="settings-yield">
            <span>While interactive audio runs</span>
            <select
              id="settings-yield"
              data-testid="settings-yield"
              value={lane.yield_to_audio}
              onChange={(e) => setLane({ yield_to_audio: (e.target as HTMLSelectElement).value as Settings["text_lane"]["yield_to_audio"] })}
            >
              <option value="none">Keep running (none)</option>
              <option value="gate">Admit nothing new (gate)</option>
              <option value="preempt">Stop text requests (preempt)</option>
            </select>
          </label>
        </div>
      </fieldset>
      <fieldset class="settings-box">
        <legend>Audio lane</legend>
        <div class="grid">
          <NumberField id="settings-audio-in-flight" label="Heavy jobs at once" min={1} value={settings.audio_lane.max_in_flight} onChange={(v) => setAudio({ max_in_flight: v })} />
          <NumberField
            id="settings-audio-interactive-reserve"
            label="Extra for interactive work"
            value={settings.audio_lane.interactive_reserve}
            onChange={(v) => setAudio({ interactive_reserve: v })}
          />
          <NumberField id="settings-audio-waiting" label="Wait slots" value={settings.audio_lane.max_waiting} onChange={(v) => setAudio({ max_waiting: v })} />
          <NumberField
            id="settings-model-idle"
            label="Unload idle speech models after (s, 0 = never)"
            step={30}
            value={settings.audio_lane.model_idle_secs}
            onChange={(v) => setAudio({ model_idle_secs: v })}
          />
        </div>
        <p class="muted">Audio lane limits apply after a restart; the idle time applies at once.</p>
      </fieldset>
      <div class="row">
        <button type="submit" data-testid="settings-save">
          Save settings
        </button>
        {saved && (
          <span class="ok" data-testid="settings-saved">
            Saved{props.info?.config_path && ` to ${props.info.config_path}`}.
          </span>
        )}
      </div>
      {error && <ErrorNotice scope="settings" error={error} onDismiss={() => setError(null)} />}
      <fieldset class="settings-box">
        <legend>Speech models</legend>
        <ul class="models" data-testid="models-list">
          {models.map((m) => (
            <li key={m.name} data-testid={`model-${m.name}`} data-state={m.status.state}>
              <b>{m.name}</b> — {m.description} ({(m.bytes / 1e6).toFixed(0)} MB):{" "}
              {m.status.state === "installed" ? (
                <span class="ok">installed</span>
              ) : (
                <span>
                  {m.status.state === "missing" ? (
                    "not installed"
                  ) : (
                    <span class="error-text">damaged ({m.status.detail})</span>
                  )}{" "}
                  {installing?.name === m.name ? (
                    <span data-testid={`model-installing-${m.name}`}>{installing.step}</span>
                  ) : (
                    <button
                      type="button"
                      data-testid={`model-install-${m.name}`}
                      disabled={installing !== null}
                      onClick={() => install(m.name)}
                    >
                      Install
                    </button>
                  )}
                </span>
              )}
            </li>
          ))}
        </ul>
        {props.info && (
          <p class="muted">
            Models: <code>{props.info.models_dir}</code> · Projects: <code>{props.info.projects_dir}</code>
          </p>
        )}
        {props.info && (
          <p class="muted" data-testid="settings-window-rendering">
            {props.info.window_rendering === "software"
              ? "The window is drawn on the CPU, so no GL driver loads in the app and the GPU stays with the models."
              : "The window is drawn with the GPU (WebKit's defaults)."}{" "}
            <code>HEADROOM_WINDOW_RENDERING=software|gpu</code> chooses, read when the app starts.
          </p>
        )}
      </fieldset>
    </form>
  );
}

// Settings: the text model's server (test connection, model discovery), lane limits and
// deadlines, installed models.
import { useEffect, useState } from "preact/hooks";
import { api, asUiError, jobId, type AppInfo, type ModelView, type ServerInfo, type Settings, type UiError } from "../api";
import { announce, focusWhenLost } from "../a11y";
import { useEvent } from "../hooks";
import {
  languageChoice,
  LOCALE_NAMES,
  LOCALES,
  setLanguage,
  systemLocale,
  formatNumber,
  formatPercent,
  t,
  tr,
  type Locale,
  type MessageKey,
} from "../i18n";
import { ErrorNotice } from "../rejection";

/** The window's language: the system's, or one chosen here (kept on this machine). */
function LanguageChoice() {
  const [choice, setChoice] = useState(languageChoice());
  return (
    <div class="row">
      <label for="setting-language">{t("settings.language")}</label>
      <select
        id="setting-language"
        data-testid="setting-language"
        value={choice}
        onChange={(e) => {
          const value = (e.target as HTMLSelectElement).value as "system" | Locale;
          setChoice(value);
          setLanguage(value);
        }}
      >
        <option value="system">{t("settings.languageSystem", { language: LOCALE_NAMES[systemLocale()] })}</option>
        {LOCALES.map((l) => (
          <option key={l} value={l} lang={l}>
            {LOCALE_NAMES[l]}
          </option>
        ))}
        <option value="pseudo">{LOCALE_NAMES.pseudo}</option>
      </select>
    </div>
  );
}

function NumberField(props: {
  id: string;
  label: MessageKey;
  value: number;
  step?: number;
  min?: number;
  onChange: (v: number) => void;
}) {
  return (
    <label class="field" for={props.id}>
      <span>{t(props.label)}</span>
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

/** What a connection test found, in a line (shown, and announced). */
function connectionLine(server: ServerInfo): string {
  return server.context_tokens !== null
    ? t("settings.connectedContext", { count: server.models.length, tokens: server.context_tokens })
    : t("settings.connected", { count: server.models.length });
}

export function SettingsView(props: { info: AppInfo | null; onSaved: () => void }) {
  const [settings, setSettings] = useState<Settings | null>(null);
  const [models, setModels] = useState<ModelView[]>([]);
  const [server, setServer] = useState<ServerInfo | null>(null);
  const [testing, setTesting] = useState(false);
  const [error, setError] = useState<UiError | null>(null);
  const [saved, setSaved] = useState(false);
  // The model being installed: its job, and the step and progress last reported (null: starting).
  const [installing, setInstalling] = useState<{
    name: string;
    job: string;
    step: { step: string; progress: number } | null;
  } | null>(null);

  useEvent("job-progress", (p) => {
    setInstalling((i) =>
      i && i.job === p.job ? { ...i, step: { step: p.step ?? "", progress: p.progress } } : i,
    );
  });

  const install = async (name: string) => {
    const job = jobId("install");
    setInstalling({ name, job, step: null });
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

  // The same root (a form) while loading as after, so the heading focused when the view opened
  // stays in place when the settings arrive.
  if (!settings)
    return (
      <form class="view" data-testid="view-settings" onSubmit={(e) => e.preventDefault()}>
        <h1 tabIndex={-1} data-testid="view-title">{t("nav.settings")}</h1>
        <LanguageChoice />
        {t("common.loading")}
      </form>
    );
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
      const found = await api.testConnection(settings.llm.url);
      setServer(found);
      announce(connectionLine(found));
    } catch (e) {
      setError(asUiError(e));
    } finally {
      setTesting(false);
      // The button disabled itself while testing.
      focusWhenLost("settings-test-connection");
    }
  };

  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      await api.saveSettings(settings);
      setSaved(true);
      announce(t("settings.saved"));
      props.onSaved();
    } catch (err) {
      setError(asUiError(err));
    }
  };

  return (
    <form class="view" data-testid="view-settings" onSubmit={save}>
      <h1 tabIndex={-1} data-testid="view-title">{t("nav.settings")}</h1>
      <LanguageChoice />
      <fieldset class="settings-box">
        <legend>{t("settings.server")}</legend>
        <div class="row">
          <label for="settings-server-url">{t("settings.serverUrl")}</label>
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
            {testing ? t("settings.testing") : t("settings.test")}
          </button>
        </div>
        {server && (
          <div class="ok" data-testid="settings-connection-result">
            {connectionLine(server)}
          </div>
        )}
        <div class="row">
          <label for="settings-model">{t("settings.model")}</label>
          <select
            id="settings-model"
            data-testid="settings-model"
            value={settings.llm.model ?? ""}
            onChange={(e) => {
              const v = (e.target as HTMLSelectElement).value;
              setSettings({ ...settings, llm: { ...settings.llm, model: v === "" ? null : v } });
            }}
          >
            <option value="">{t("settings.firstModel")}</option>
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
        <p class="muted">{t("settings.apiKeys")}</p>
      </fieldset>
      <fieldset class="settings-box">
        <legend>{t("settings.textLane")}</legend>
        <div class="grid">
          <NumberField id="settings-max-in-flight" label="settings.inFlight" min={1} value={lane.max_in_flight} onChange={(v) => setLane({ max_in_flight: v })} />
          <NumberField id="settings-max-waiting" label="settings.waitSlots" value={lane.max_waiting} onChange={(v) => setLane({ max_waiting: v })} />
          <NumberField
            id="settings-context-tokens"
            label="settings.contextTokens"
            value={lane.context_tokens ?? 0}
            onChange={(v) => setLane({ context_tokens: v > 0 ? v : null })}
          />
          <NumberField id="settings-max-input-chars" label="settings.maxInput" min={1} value={lane.max_input_chars} onChange={(v) => setLane({ max_input_chars: v })} />
          <NumberField id="settings-queue-wait" label="settings.queueWait" step={0.5} value={lane.queue_wait_secs} onChange={(v) => setLane({ queue_wait_secs: v })} />
          <NumberField id="settings-first-chunk" label="settings.firstChunk" step={0.5} value={lane.first_chunk_secs} onChange={(v) => setLane({ first_chunk_secs: v })} />
          <NumberField id="settings-total" label="settings.total" step={1} value={lane.total_secs} onChange={(v) => setLane({ total_secs: v })} />
          <NumberField
            id="settings-audio-headroom"
            label="settings.audioHeadroom"
            step={256}
            value={lane.audio_headroom_mib ?? 0}
            onChange={(v) => setLane({ audio_headroom_mib: v > 0 ? v : null })}
          />
          <label class="field" for="settings-yield">
            <span>{t("settings.yield")}</span>
            <select
              id="settings-yield"
              data-testid="settings-yield"
              value={lane.yield_to_audio}
              onChange={(e) => setLane({ yield_to_audio: (e.target as HTMLSelectElement).value as Settings["text_lane"]["yield_to_audio"] })}
            >
              <option value="none">{t("yield.none")}</option>
              <option value="gate">{t("yield.gate")}</option>
              <option value="preempt">{t("yield.preempt")}</option>
            </select>
          </label>
        </div>
      </fieldset>
      <fieldset class="settings-box">
        <legend>{t("settings.audioLane")}</legend>
        <div class="grid">
          <NumberField id="settings-audio-in-flight" label="settings.heavyJobs" min={1} value={settings.audio_lane.max_in_flight} onChange={(v) => setAudio({ max_in_flight: v })} />
          <NumberField
            id="settings-audio-interactive-reserve"
            label="settings.interactiveReserve"
            value={settings.audio_lane.interactive_reserve}
            onChange={(v) => setAudio({ interactive_reserve: v })}
          />
          <NumberField id="settings-audio-waiting" label="settings.waitSlots" value={settings.audio_lane.max_waiting} onChange={(v) => setAudio({ max_waiting: v })} />
          <NumberField
            id="settings-model-idle"
            label="settings.modelIdle"
            step={30}
            value={settings.audio_lane.model_idle_secs}
            onChange={(v) => setAudio({ model_idle_secs: v })}
          />
        </div>
        <p class="muted">{t("settings.audioNote")}</p>
      </fieldset>
      <div class="row">
        <button type="submit" data-testid="settings-save">
          {t("settings.save")}
        </button>
        {saved && (
          <span class="ok" data-testid="settings-saved">
            {props.info?.config_path ? t("settings.savedTo", { path: props.info.config_path }) : t("settings.saved")}
          </span>
        )}
      </div>
      {error && <ErrorNotice scope="settings" error={error} onDismiss={() => setError(null)} />}
      <fieldset class="settings-box">
        <legend>{t("settings.models")}</legend>
        <ul class="models" data-testid="models-list">
          {models.map((m) => (
            <li key={m.name} data-testid={`model-${m.name}`} data-state={m.status.state}>
              {tr("settings.modelLine", { name: <b>{m.name}</b>, description: m.description, size: formatNumber(m.bytes / 1e6, 0) })}{" "}
              {m.status.state === "installed" ? (
                <span class="ok">{t("model.installed")}</span>
              ) : (
                <span>
                  {m.status.state === "missing" ? (
                    t("model.missing")
                  ) : (
                    <span class="error-text">{t("model.damaged", { detail: m.status.detail })}</span>
                  )}{" "}
                  {installing?.name === m.name ? (
                    <span data-testid={`model-installing-${m.name}`}>
                      {installing.step === null
                        ? t("settings.installStarting")
                        : t("settings.installStep", {
                            step: installing.step.step,
                            percent: formatPercent(installing.step.progress),
                          })}
                    </span>
                  ) : (
                    <button
                      type="button"
                      data-testid={`model-install-${m.name}`}
                      disabled={installing !== null}
                      onClick={() => install(m.name)}
                    >
                      {t("settings.install")}
                    </button>
                  )}
                </span>
              )}
            </li>
          ))}
        </ul>
        {props.info && (
          <p class="muted">
            {tr("settings.dirs", {
              models: <code>{props.info.models_dir}</code>,
              projects: <code>{props.info.projects_dir}</code>,
            })}
          </p>
        )}
        {props.info && (
          <p class="muted" data-testid="settings-window-rendering">
            {props.info.window_rendering === "software"
              ? t("settings.renderSoftware")
              : t("settings.renderGpu")}{" "}
            {tr("settings.renderChoose", { variable: <code>HEADROOM_WINDOW_RENDERING=software|gpu</code> })}
          </p>
        )}
      </fieldset>
    </form>
  );
}

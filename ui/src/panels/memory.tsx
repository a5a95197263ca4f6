// The app's own memory and the speech models loaded in it (each with what it cost to load),
// with "Free memory", which lets go of every model no job is using.
import { useEffect, useState } from "preact/hooks";
import { api, asUiError, type MemoryView, type UiError } from "../api";
import { codeLabel, formatList, formatMib, formatSeconds, t } from "../i18n";
import { ErrorNotice } from "../rejection";

/** How often the panel reads the app's memory again. */
const REFRESH_MS = 5000;

function mib(value: number | null): string {
  return value === null ? t("memory.unknown") : formatMib(Math.round(value));
}

export function MemoryPanel() {
  const [view, setView] = useState<MemoryView | null>(null);
  const [error, setError] = useState<UiError | null>(null);
  // The models let go by the last "Free memory" (shown in the language of the moment).
  const [freed, setFreed] = useState<MemoryView["released"] | null>(null);
  useEffect(() => {
    let alive = true;
    const read = () =>
      api.residentModels().then(
        (v) => alive && setView(v),
        (e) => alive && setError(asUiError(e)),
      );
    read();
    const timer = setInterval(read, REFRESH_MS);
    return () => {
      alive = false;
      clearInterval(timer);
    };
  }, []);
  const free = async () => {
    setError(null);
    try {
      const v = await api.freeMemory();
      setView(v);
      setFreed(v.released);
    } catch (e) {
      setError(asUiError(e));
    }
  };
  return (
    <section class="panel" data-testid="memory-panel" aria-labelledby="memory-heading">
      <h2 id="memory-heading">{t("memory.heading")}</h2>
      <div data-testid="memory-process">{t("memory.process", { value: mib(view?.process_mib ?? null) })}</div>
      {view && view.models.length === 0 && (
        <p class="muted" data-testid="memory-no-models">
          {t("memory.noModels")}
        </p>
      )}
      {view && view.models.length > 0 && (
        <ul class="memory-list" data-testid="memory-models">
          {view.models.map((m) => (
            <li key={m.name} data-testid={`memory-model-${m.name}`}>
              <span>
                {m.name} <span class="muted">({codeLabel("role", m.role)})</span>
              </span>
              <span>
                {m.loading
                  ? t("memory.loading")
                  : m.in_use
                    ? t("memory.inUse", { mib: mib(m.resident_mib) })
                    : t("memory.idle", { mib: mib(m.resident_mib), idle: formatSeconds(Math.round(m.idle_secs), 0) })}
              </span>
            </li>
          ))}
        </ul>
      )}
      {view && (
        <div class="muted" data-testid="memory-idle-rule">
          {view.idle_after_secs === null
            ? t("memory.keep")
            : t("memory.idleRule", { seconds: formatSeconds(Math.round(view.idle_after_secs), 0) })}
        </div>
      )}
      <button data-testid="free-memory" onClick={free}>
        {t("memory.free")}
      </button>
      {freed && (
        <p class="ok" data-testid="memory-freed">
          {freed.length === 0
            ? t("memory.nothingFreed")
            : t("memory.freed", {
                names: formatList(freed.map((m) => m.name)),
                mib: formatMib(Math.round(freed.reduce((sum, m) => sum + (m.resident_mib ?? 0), 0))),
              })}
        </p>
      )}
      {error && <ErrorNotice scope="memory" error={error} onDismiss={() => setError(null)} />}
    </section>
  );
}

// The app's own memory and the speech models loaded in it (each with what it cost to load),
// with "Free memory", which lets go of every model no job is using.
import { useEffect, useState } from "preact/hooks";
import { api, asUiError, type MemoryView, type UiError } from "../api";
import { ErrorNotice } from "../rejection";

/** How often the panel reads the app's memory again. */
const REFRESH_MS = 5000;

function mib(value: number | null): string {
  return value === null ? "—" : `${Math.round(value)} MiB`;
}

export function MemoryPanel() {
  const [view, setView] = useState<MemoryView | null>(null);
  const [error, setError] = useState<UiError | null>(null);
  const [freed, setFreed] = useState<string | null>(null);
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
      const total = v.released.reduce((sum, m) => sum + (m.resident_mib ?? 0), 0);
      setFreed(
        v.released.length === 0
          ? "No model was idle: nothing to free."
          : `Let go of ${v.released.map((m) => m.name).join(", ")} (about ${Math.round(total)} MiB).`,
      );
    } catch (e) {
      setError(asUiError(e));
    }
  };
  return (
    <section class="panel" data-testid="memory-panel" aria-labelledby="memory-heading">
      <h2 id="memory-heading">Memory</h2>
      <div data-testid="memory-process">App: {mib(view?.process_mib ?? null)}</div>
      {view && view.models.length === 0 && (
        <p class="muted" data-testid="memory-no-models">
          No speech model loaded.
        </p>
      )}
      {view && view.models.length > 0 && (
        <ul class="memory-list" data-testid="memory-models">
          {view.models.map((m) => (
            <li key={m.name} data-testid={`memory-model-${m.name}`}>
              <span>
                {m.name} <span class="muted">({m.role})</span>
              </span>
              <span>
                {m.loading
                  ? "loading…"
                  : `${mib(m.resident_mib)} ${m.in_use ? "· in use" : `· idle ${Math.round(m.idle_secs)} s`}`}
              </span>
            </li>
          ))}
        </ul>
      )}
      {view && (
        <div class="muted" data-testid="memory-idle-rule">
          {view.idle_after_secs === null
            ? "Models stay loaded until memory is freed."
            : `Unused models are let go after ${Math.round(view.idle_after_secs)} s.`}
        </div>
      )}
      <button data-testid="free-memory" onClick={free}>
        Free memory
      </button>
      {freed && (
        <p class="ok" data-testid="memory-freed">
          {freed}
        </p>
      )}
      {error && <ErrorNotice scope="memory" error={error} onDismiss={() => setError(null)} />}
    </section>
  );
}

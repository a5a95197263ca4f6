// Small hooks that keep plumbing out of the views: subscribing to a shell event for as long as
// a component is mounted, and running a cancellable job.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { announce } from "./a11y";
import { api, asUiError, jobId, on, type UiError } from "./api";
import type { EventName, EventPayloads } from "./bindings";
import { t } from "./i18n";

/** Calls `handler` with each `event` payload while the component is mounted. The latest
 * handler is used, so it may close over state without resubscribing. */
export function useEvent<E extends EventName>(event: E, handler: (payload: EventPayloads[E]) => void): void {
  const latest = useRef(handler);
  latest.current = handler;
  useEffect(() => {
    const stop = on(event, (payload) => latest.current(payload));
    return () => {
      stop.then((unlisten) => unlisten());
    };
  }, [event]);
}

/** A cancellable job: `run` gives the work a fresh job id and tracks it while it runs;
 * `cancel` asks the shell to stop it. `running` is the id of the job in progress, if any. */
export function useJob(kind: string) {
  const [running, setRunning] = useState<string | null>(null);
  const run = useCallback(
    async <T>(work: (job: string) => Promise<T>): Promise<T> => {
      const job = jobId(kind);
      setRunning(job);
      try {
        return await work(job);
      } finally {
        setRunning((current) => (current === job ? null : current));
      }
    },
    [kind],
  );
  const cancel = useCallback(() => {
    if (running) api.cancelJob(running);
  }, [running]);
  // The job Pause was pressed for: its "cancelled" end is a pause.
  const paused = useRef<string | null>(null);
  /** Stops the job keeping its checkpoint (listed under Interrupted jobs to resume). */
  const pause = useCallback(() => {
    if (!running) return;
    paused.current = running;
    api.pauseJob(running);
  }, [running]);
  /** `run` for a job that can be paused: `null` when it was (announced, and listed at once
   * under Interrupted jobs). */
  const runPausable = useCallback(
    async <T>(work: (job: string) => Promise<T>): Promise<T | null> => {
      let started = "";
      try {
        return await run((job) => {
          started = job;
          return work(job);
        });
      } catch (e) {
        // Stopped inside the work ("cancelled") or while it waited on a lane (a cancelled
        // rejection): either way, the pause.
        const error = asUiError(e);
        if (paused.current === started && (error.kind === "cancelled" || error.rejection?.reason === "cancelled")) {
          announce(t("announce.paused"));
          jobsChanged();
          return null;
        }
        throw e;
      } finally {
        if (paused.current === started) paused.current = null;
      }
    },
    [run],
  );
  return { running, run, runPausable, cancel, pause };
}

// The jobs recorded in projects changed here (one paused): the Interrupted jobs panel reads
// them again.
const jobsListeners = new Set<() => void>();

export function jobsChanged() {
  jobsListeners.forEach((listener) => listener());
}

export function useJobsChanged(listener: () => void) {
  useEffect(() => {
    jobsListeners.add(listener);
    return () => {
      jobsListeners.delete(listener);
    };
  }, [listener]);
}

/** A view's error and `guard`, which runs an action and shows what it threw (clearing the last
 * error first). */
export function useGuarded() {
  const [error, setError] = useState<UiError | null>(null);
  const guard = useCallback(async (f: () => Promise<void>) => {
    setError(null);
    try {
      await f();
    } catch (e) {
      setError(asUiError(e));
    }
  }, []);
  return { error, setError, guard };
}

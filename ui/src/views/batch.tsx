// Several recordings at once: dropped on the Projects view (or listed by path), one queued
// job makes a project of each and transcribes it; a file that fails is named with why.
import { listen } from "@tauri-apps/api/event";
import { useEffect, useRef, useState } from "preact/hooks";
import {
  api,
  asUiError,
  type FileFailureReason,
  type FileOutcome,
  type JobTime,
  type Project,
  type UiError,
} from "../api";
import { useEvent, useJob } from "../hooks";
import { batchServers, MAX_PER_SERVER, piecesPerServer } from "./batch.state";
import { JobTimeText } from "../jobtime";
import { formatPercent, t, type MessageKey } from "../i18n";
import { ErrorNotice } from "../rejection";

/** The catalog key of every reason a file fails: the generated union makes a missing one a
 * type error. */
const FAILURE_REASONS: Record<FileFailureReason, MessageKey> = {
  folder_unreadable: "batch.reason.folder_unreadable",
  empty_folder: "batch.reason.empty_folder",
  unreadable: "batch.reason.unreadable",
  not_audio: "batch.reason.not_audio",
  too_large: "batch.reason.too_large",
  refused: "batch.reason.refused",
  failed: "batch.reason.failed",
};

export function BatchTranscribe(props: { onChanged: () => void; onOpen: (p: Project) => void }) {
  const [text, setText] = useState("");
  const [serverText, setServerText] = useState("");
  const [serverModel, setServerModel] = useState("");
  const [perServer, setPerServer] = useState("");
  const [allowRemote, setAllowRemote] = useState(false);
  // How many servers the running batch is heard on (0: this machine's engine).
  const [onServers, setOnServers] = useState(0);
  // The servers' fields as they are now: files dropped on the window start a batch from a
  // listener made once, which would otherwise see the fields as they were then.
  const serverFields = useRef({ serverText, serverModel, perServer, allowRemote });
  serverFields.current = { serverText, serverModel, perServer, allowRemote };
  const [progress, setProgress] = useState(0);
  const [time, setTime] = useState<JobTime | null>(null);
  const [outcomes, setOutcomes] = useState<FileOutcome[] | null>(null);
  const [error, setError] = useState<UiError | null>(null);
  const batch = useJob("transcribe-files");

  useEvent("job-progress", (p) => {
    if (p.job === batch.running) {
      setProgress(p.progress);
      setTime(p.time);
    }
  });

  const start = async (paths: string[]) => {
    const files = paths.map((p) => p.trim()).filter((p) => p !== "");
    const fields = serverFields.current;
    // Servers named with pieces per server out of range: the field says so; nothing starts
    // (not even on this machine's engine, which is not what was asked for).
    const badPieces = fields.serverText.trim() !== "" && piecesPerServer(fields.perServer) === undefined;
    if (files.length === 0 || batch.running || badPieces) return;
    setError(null);
    setOutcomes(null);
    setProgress(0);
    setTime(null);
    try {
      const servers = batchServers(fields.serverText, fields.perServer, fields.allowRemote);
      const model = servers && fields.serverModel.trim() !== "" ? fields.serverModel.trim() : null;
      setOnServers(servers?.urls.length ?? 0);
      setOutcomes(await batch.run((id) => api.transcribeFiles(files, id, servers, model)));
    } catch (e) {
      setError(asUiError(e));
    } finally {
      // Cancelled or not, the projects finished so far are listed.
      props.onChanged();
    }
  };

  // Files dropped on the window while this view is shown: one job for all of them.
  useEffect(() => {
    const stop = listen<{ paths: string[] }>("tauri://drag-drop", (e) => {
      if (e.payload.paths?.length) {
        setText(e.payload.paths.join("\n"));
        start(e.payload.paths);
      }
    });
    return () => {
      stop.then((unlisten) => unlisten());
    };
  }, []);

  // Pieces per server typed but not a whole number 1 to 64 (with servers named): not started.
  const perServerBad = serverText.trim() !== "" && piecesPerServer(perServer) === undefined;
  const made = outcomes?.filter((o) => o.project).length ?? 0;
  const failed = outcomes?.filter((o) => o.failure).length ?? 0;
  return (
    <section class="batch" data-testid="batch" aria-labelledby="batch-title">
      <h2 id="batch-title">{t("batch.title")}</h2>
      <p class="muted">{t("batch.about")}</p>
      <form
        class="column"
        onSubmit={(e) => {
          e.preventDefault();
          start(text.split("\n"));
        }}
      >
        <label for="batch-paths">{t("batch.paths")}</label>
        <textarea
          id="batch-paths"
          data-testid="batch-paths"
          rows={3}
          value={text}
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
        />
        <details data-testid="batch-servers-section">
          <summary data-testid="batch-servers-toggle">{t("batch.servers.title")}</summary>
          <p class="muted">{t("batch.servers.about")}</p>
          <div class="column">
            <label for="batch-servers">{t("batch.servers.urls")}</label>
            <textarea
              id="batch-servers"
              data-testid="batch-servers"
              rows={2}
              placeholder={t("batch.servers.urlsPlaceholder")}
              value={serverText}
              onInput={(e) => setServerText((e.target as HTMLTextAreaElement).value)}
            />
            <div class="row">
              <span class="labelled">
                <label for="batch-server-model">{t("batch.servers.model")}</label>
                <input
                  id="batch-server-model"
                  data-testid="batch-server-model"
                  placeholder={t("batch.servers.modelPlaceholder")}
                  value={serverModel}
                  onInput={(e) => setServerModel((e.target as HTMLInputElement).value)}
                />
              </span>
              <span class="labelled">
                <label for="batch-per-server">{t("batch.servers.perServer")}</label>
                <input
                  id="batch-per-server"
                  data-testid="batch-per-server"
                  type="number"
                  min={1}
                  max={MAX_PER_SERVER}
                  step={1}
                  placeholder="1"
                  value={perServer}
                  aria-invalid={perServerBad}
                  aria-describedby={perServerBad ? "batch-per-server-error" : undefined}
                  onInput={(e) => setPerServer((e.target as HTMLInputElement).value)}
                />
              </span>
              {perServerBad && (
                <span id="batch-per-server-error" class="error-text" data-testid="batch-per-server-error">
                  {t("batch.servers.perServerRange", { most: MAX_PER_SERVER })}
                </span>
              )}
            </div>
            <label class="toggle">
              <input
                type="checkbox"
                data-testid="batch-servers-allow"
                checked={allowRemote}
                onChange={(e) => setAllowRemote((e.target as HTMLInputElement).checked)}
              />
              {t("batch.servers.allowRemote")}
            </label>
          </div>
        </details>
        <div class="row">
          <button type="submit" data-testid="batch-start" disabled={batch.running !== null || text.trim() === "" || perServerBad}>
            {t("batch.start")}
          </button>
          {batch.running && (
            <>
              <progress data-testid="batch-progress" max={1} value={progress} aria-label={t("batch.progress")} />
              <span>{formatPercent(progress)}</span>
              <JobTimeText time={time} testid="batch-time" />
              <button type="button" data-testid="batch-cancel" onClick={batch.cancel}>
                {t("common.cancel")}
              </button>
            </>
          )}
        </div>
      </form>
      {error && <ErrorNotice scope="batch" error={error} onDismiss={() => setError(null)} />}
      <div role="status" aria-live="polite">
        {(batch.running || outcomes) && onServers > 0 && (
          <p data-testid="batch-on-servers">{t("batch.servers.on", { count: onServers })}</p>
        )}
        {outcomes && (
          <p data-testid="batch-summary">{t("batch.summary", { made, failed })}</p>
        )}
      </div>
      {outcomes && (
        <ul class="batch-results" data-testid="batch-results">
          {outcomes.map((o, i) => (
            <li key={i} data-testid={`batch-result-${i}`} data-state={o.project ? "made" : "failed"}>
              <code>{o.path}</code>{" "}
              {o.project ? (
                <button
                  data-testid={`batch-open-${i}`}
                  onClick={async () => {
                    try {
                      props.onOpen(await api.openProject(o.project!.id));
                    } catch (e) {
                      setError(asUiError(e));
                    }
                  }}
                >
                  {t("batch.open", { name: o.project.name })}
                </button>
              ) : (
                o.failure && (
                  <span class="error-text" data-testid={`batch-error-${i}`} data-reason={o.failure.reason}>
                    {t("batch.failed")} {t(FAILURE_REASONS[o.failure.reason])}{" "}
                    <span class="muted">({o.failure.message})</span>
                  </span>
                )
              )}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

// Create, open, rename and delete projects.
import { useState } from "preact/hooks";
import { api, asUiError, type Project, type ProjectEntry, type UiError } from "../api";
import { announce, focusWhenLost } from "../a11y";
import { formatDateTime, t, tr } from "../i18n";
import { ErrorNotice } from "../rejection";
import { BatchTranscribe } from "./batch";

export function ProjectsView(props: {
  entries: ProjectEntry[];
  current: Project | null;
  projectsDir: string;
  onOpen: (p: Project) => void;
  /** The current project changed (renamed) without leaving this view. */
  onCurrentChanged: (p: Project) => void;
  onChanged: () => void;
  onDeleted: (id: string) => void;
}) {
  const [name, setName] = useState("");
  const [renaming, setRenaming] = useState<string | null>(null);
  const [newName, setNewName] = useState("");
  const [confirmDelete, setConfirmDelete] = useState<string | null>(null);
  const [error, setError] = useState<UiError | null>(null);

  const run = async (f: () => Promise<void>) => {
    setError(null);
    try {
      await f();
    } catch (e) {
      setError(asUiError(e));
    }
  };

  const create = (e: Event) => {
    e.preventDefault();
    run(async () => {
      const p = await api.createProject(name);
      setName("");
      props.onChanged();
      props.onOpen(p);
    });
  };

  return (
    <div class="view" data-testid="view-projects">
      <h1 tabIndex={-1} data-testid="view-title">{t("nav.projects")}</h1>
      <p class="muted">
        {tr("projects.about", { dir: <code data-testid="projects-dir">{props.projectsDir}</code> })}
      </p>
      <form class="row" onSubmit={create}>
        <label for="project-name">{t("projects.new")}</label>
        <input
          id="project-name"
          data-testid="project-name-input"
          value={name}
          placeholder={t("projects.placeholder")}
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
        <button type="submit" data-testid="project-create" disabled={name.trim() === ""}>
          {t("common.create")}
        </button>
      </form>
      {error && <ErrorNotice scope="projects" error={error} onDismiss={() => setError(null)} />}
      {props.entries.length === 0 ? (
        <p class="muted" data-testid="project-list-empty">
          {t("projects.empty")}
        </p>
      ) : (
        <ul class="project-list" data-testid="project-list">
          {props.entries.map((entry) =>
            entry.state === "unreadable" ? (
              <li key={entry.id} data-testid={`project-item-${entry.id}`} class="unreadable">
                <b>{entry.id}</b> <span class="error-text">{entry.error}</span>
              </li>
            ) : (
              <li
                key={entry.id}
                data-testid={`project-item-${entry.id}`}
                class={props.current?.id === entry.id ? "current" : ""}
              >
                {renaming === entry.id ? (
                  <form
                    class="row"
                    onSubmit={(e) => {
                      e.preventDefault();
                      run(async () => {
                        const p = await api.renameProject(entry.id, newName);
                        setRenaming(null);
                        announce(t("announce.renamed", { name: p.name }));
                        focusWhenLost(`project-rename-${entry.id}`);
                        props.onChanged();
                        if (props.current?.id === entry.id) props.onCurrentChanged(p);
                      });
                    }}
                  >
                    <label class="sr-only" for={`rename-${entry.id}`}>
                      {t("common.newName")}
                    </label>
                    <input
                      id={`rename-${entry.id}`}
                      data-testid="project-rename-input"
                      value={newName}
                      onInput={(e) => setNewName((e.target as HTMLInputElement).value)}
                    />
                    <button type="submit" data-testid="project-rename-save">
                      {t("common.save")}
                    </button>
                    <button type="button" class="quiet" data-testid="project-rename-cancel" onClick={() => {
                        setRenaming(null);
                        focusWhenLost(`project-rename-${entry.id}`);
                      }}>
                      {t("common.cancel")}
                    </button>
                  </form>
                ) : (
                  <>
                    <span class="project-name" data-testid={`project-name-${entry.id}`}>
                      {entry.name}
                    </span>
                    <span class="muted">
                      {t("projects.summary", { count: entry.segments, modified: formatDateTime(entry.modified_unix_ms) })}
                    </span>
                    <span class="actions">
                      <button
                        data-testid={`project-open-${entry.id}`}
                        onClick={() => run(async () => props.onOpen(await api.openProject(entry.id)))}
                      >
                        {t("common.open")}
                      </button>
                      <button
                        data-testid={`project-rename-${entry.id}`}
                        onClick={() => {
                          setRenaming(entry.id);
                          setNewName(entry.name);
                          focusWhenLost("project-rename-input");
                        }}
                      >
                        {t("common.rename")}
                      </button>
                      {confirmDelete === entry.id ? (
                        <>
                          <button
                            class="danger"
                            data-testid="project-delete-confirm"
                            onClick={() =>
                              run(async () => {
                                await api.deleteProject(entry.id);
                                setConfirmDelete(null);
                                props.onDeleted(entry.id);
                                announce(t("announce.deleted", { name: entry.name }));
                                focusWhenLost("project-name-input");
                              })
                            }
                          >
                            {t("projects.deleteConfirm", { name: entry.name })}
                          </button>
                          <button class="quiet" data-testid="project-delete-cancel" onClick={() => {
                            setConfirmDelete(null);
                            focusWhenLost(`project-delete-${entry.id}`);
                          }}>
                            {t("projects.keep")}
                          </button>
                        </>
                      ) : (
                        <button data-testid={`project-delete-${entry.id}`} onClick={() => {
                          // The safe choice first: Enter again keeps the project.
                          setConfirmDelete(entry.id);
                          focusWhenLost("project-delete-cancel");
                        }}>
                          {t("common.delete")}
                        </button>
                      )}
                    </span>
                  </>
                )}
              </li>
            ),
          )}
        </ul>
      )}
      <BatchTranscribe onChanged={props.onChanged} onOpen={props.onOpen} />
    </div>
  );
}

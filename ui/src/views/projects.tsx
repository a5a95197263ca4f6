// Create, open, rename and delete projects.
import { useState } from "preact/hooks";
import { api, asUiError, type Project, type ProjectEntry, type UiError } from "../api";
import { ErrorNotice } from "../rejection";

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
      <h1>Projects</h1>
      <p class="muted">
        Each project is a folder under <code data-testid="projects-dir">{props.projectsDir}</code> with its audio,
        transcript, cleanups and synthesized speech.
      </p>
      <form class="row" onSubmit={create}>
        <label for="project-name">New project</label>
        <input
          id="project-name"
          data-testid="project-name-input"
          value={name}
          placeholder="Episode 12"
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
        <button type="submit" data-testid="project-create" disabled={name.trim() === ""}>
          Create
        </button>
      </form>
      {error && <ErrorNotice scope="projects" error={error} onDismiss={() => setError(null)} />}
      {props.entries.length === 0 ? (
        <p class="muted" data-testid="project-list-empty">
          No projects yet.
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
                        props.onChanged();
                        if (props.current?.id === entry.id) props.onCurrentChanged(p);
                      });
                    }}
                  >
                    <label class="sr-only" for={`rename-${entry.id}`}>
                      New name
                    </label>
                    <input
                      id={`rename-${entry.id}`}
                      data-testid="project-rename-input"
                      value={newName}
                      onInput={(e) => setNewName((e.target as HTMLInputElement).value)}
                    />
                    <button type="submit" data-testid="project-rename-save">
                      Save
                    </button>
                    <button type="button" class="quiet" data-testid="project-rename-cancel" onClick={() => setRenaming(null)}>
                      Cancel
                    </button>
                  </form>
                ) : (
                  <>
                    <span class="project-name" data-testid={`project-name-${entry.id}`}>
                      {entry.name}
                    </span>
                    <span class="muted">
                      {entry.segments} segment{entry.segments === 1 ? "" : "s"} ·{" "}
                      {new Date(entry.modified_unix_ms).toLocaleString()}
                    </span>
                    <span class="actions">
                      <button
                        data-testid={`project-open-${entry.id}`}
                        onClick={() => run(async () => props.onOpen(await api.openProject(entry.id)))}
                      >
                        Open
                      </button>
                      <button
                        data-testid={`project-rename-${entry.id}`}
                        onClick={() => {
                          setRenaming(entry.id);
                          setNewName(entry.name);
                        }}
                      >
                        Rename
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
                              })
                            }
                          >
                            Delete “{entry.name}” and its files
                          </button>
                          <button class="quiet" data-testid="project-delete-cancel" onClick={() => setConfirmDelete(null)}>
                            Keep
                          </button>
                        </>
                      ) : (
                        <button data-testid={`project-delete-${entry.id}`} onClick={() => setConfirmDelete(entry.id)}>
                          Delete
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
    </div>
  );
}

// Choosing files: the one Browse… (the system's open dialog, with the audio types the app
// reads) and the one save dialog for a copy of a project file. Every view that picks a file
// uses these, so the file types are written down once.
import { open } from "@tauri-apps/plugin-dialog";
import { api } from "./api";
import { AUDIO_EXTENSIONS } from "./bindings";
import { t } from "./i18n";

/** The open dialog's filter for audio (named in the current language): the extensions the
 * decoder reads, as the Rust side lists them (generated into the bindings). */
export const audioFilters = () => [{ name: t("files.audio"), extensions: [...AUDIO_EXTENSIONS] }];

/** Asks for one audio file; `null` when the dialog was cancelled. */
export async function chooseAudioFile(): Promise<string | null> {
  const chosen = await open({ multiple: false, directory: false, filters: audioFilters() });
  return typeof chosen === "string" ? chosen : null;
}

/** Asks where to save a copy of the project file `file`, suggesting its name (or `fallback`). */
export function chooseSaveCopyPath(file: string, fallback: string): Promise<string | null> {
  return api.chooseSavePath(file.split("/").pop() ?? fallback);
}

/** "Browse…" beside an audio path field: the chosen file goes to `onChosen`. */
export function BrowseAudio(props: { testid: string; onChosen: (path: string) => void }) {
  return (
    <button
      type="button"
      data-testid={props.testid}
      onClick={async () => {
        const chosen = await chooseAudioFile();
        if (chosen !== null) props.onChosen(chosen);
      }}
    >
      {t("common.browse")}
    </button>
  );
}

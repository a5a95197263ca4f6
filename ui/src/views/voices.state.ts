// The Voices view's state: the library, which voice is open, what is typed, and the results
// shown for the open voice. Every change the view can make is an `Action`; `reducer` is the
// one place that says what each does. (Running jobs are tracked by `useJob`, the view's last
// error by `useGuarded`.)
import type { ClipAdded, ClipReport, Health, MatchProgress, Settings, VoiceProfile, VoiceTakeView } from "../api";
import { t } from "../i18n";

export type State = {
  voices: VoiceProfile[];
  /** The open voice's id. */
  selected: string | null;
  /** The "New voice" field. */
  newName: string;
  /** The open voice's "New name" field. */
  rename: string;
  /** The reference clip's path field. */
  clipPath: string;
  /** The checks of the last clip refused for the open voice. */
  refused: ClipReport | null;
  /** The voice match's budget, in takes. */
  budget: number;
  /** The running voice match's progress. */
  progress: MatchProgress | null;
  /** The test line to speak. */
  line: string;
  /** The last test line spoken in the open voice. */
  take: VoiceTakeView | null;
  /** Clip transcripts as edited, by clip id, until saved. */
  transcripts: Record<string, string>;
  /** The app's settings (the cloning server is edited here). */
  settings: Settings | null;
  /** The cloning server's answer to Test. */
  health: Health | null;
  /** The recording's input level, dBFS. */
  level: number | null;
};

export const initialState: State = {
  voices: [],
  selected: null,
  newName: "",
  rename: "",
  clipPath: "",
  refused: null,
  budget: 160,
  progress: null,
  // The test line, in the language of the window when it opened.
  line: t("voices.sampleLine"),
  take: null,
  transcripts: {},
  settings: null,
  health: null,
  level: null,
};

/** The text fields, each set as typed. */
export type Field = "newName" | "rename" | "clipPath" | "line";

export type Action =
  | { type: "typed"; field: Field; value: string }
  | { type: "budget"; value: number }
  | { type: "transcript-typed"; clip: string; value: string }
  | { type: "loaded"; voices: VoiceProfile[] }
  | { type: "settings-loaded"; settings: Settings }
  /** The cloning server's kind or address edited (not saved yet). */
  | { type: "settings-edited"; settings: Settings }
  | { type: "settings-saved" }
  | { type: "health"; health: Health }
  /** A voice opened; what was shown for the last one goes. */
  | { type: "selected"; id: string }
  /** A voice was made from the "New voice" field, and is opened (the library reloads). */
  | { type: "created"; id: string }
  /** The open voice was deleted (the library reloads). */
  | { type: "deleted" }
  /** A voice came back changed (renamed, a clip removed or its transcript saved, matched). */
  | { type: "updated"; voice: VoiceProfile }
  | { type: "renamed"; voice: VoiceProfile }
  /** A clip was checked: added (from the path field: it is cleared) or refused with why. */
  | { type: "clip-checked"; result: ClipAdded; fromPath: boolean }
  | { type: "record-started" }
  | { type: "level"; dbfs: number }
  | { type: "match-started" }
  | { type: "match-progress"; progress: MatchProgress }
  | { type: "spoken"; take: VoiceTakeView };

const replace = (voices: VoiceProfile[], v: VoiceProfile) => voices.map((x) => (x.id === v.id ? v : x));

/** Opening another voice (or none) drops what was shown for the last one. */
const open = (state: State, selected: string | null): State => ({ ...state, selected, take: null, refused: null });

export function reducer(state: State, action: Action): State {
  switch (action.type) {
    case "typed":
      return { ...state, [action.field]: action.value };
    case "budget":
      return { ...state, budget: action.value };
    case "transcript-typed":
      return { ...state, transcripts: { ...state.transcripts, [action.clip]: action.value } };
    case "loaded":
      return { ...state, voices: action.voices };
    case "settings-loaded":
    case "settings-edited":
      return { ...state, settings: action.settings };
    case "settings-saved":
      return { ...state, health: null };
    case "health":
      return { ...state, health: action.health };
    case "selected":
      return open(state, action.id);
    case "created":
      return open({ ...state, newName: "" }, action.id);
    case "deleted":
      return open(state, null);
    case "updated":
      return { ...state, voices: replace(state.voices, action.voice) };
    case "renamed":
      return { ...state, voices: replace(state.voices, action.voice), rename: "" };
    case "clip-checked": {
      const { result } = action;
      return {
        ...state,
        voices: replace(state.voices, result.voice),
        refused: result.added ? null : result.report,
        clipPath: result.added && action.fromPath ? "" : state.clipPath,
      };
    }
    case "record-started":
      return { ...state, level: null };
    case "level":
      return { ...state, level: action.dbfs };
    case "match-started":
      return { ...state, progress: null };
    case "match-progress":
      return { ...state, progress: action.progress };
    case "spoken":
      return { ...state, take: action.take };
  }
}

/** The open voice, if it is still in the library. */
export function selectedVoice(state: State): VoiceProfile | null {
  return state.voices.find((v) => v.id === state.selected) ?? null;
}

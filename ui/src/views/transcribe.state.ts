// The Transcribe view's state: the audio path, a transcription's progress, a recording's level
// and live transcript, the export, the segments' unsaved edits and the view's error. Every
// change is an `Action`; `reducer` says what each does. (Running jobs are tracked by `useJob`.)
import type { JobTime, LiveLine, UiError } from "../api";

export type State = {
  /** The audio file to transcribe (typed, dropped, browsed or just recorded). */
  path: string;
  /** The running transcription's progress, 0..=1, and its time (elapsed, left). */
  progress: number;
  time: JobTime | null;
  /** The recording's input level, dBFS. */
  level: number | null;
  /** Transcribe while recording. */
  live: boolean;
  /** While recording live: the phrases made final, and the one being spoken. */
  liveFinals: LiveLine[];
  livePartial: LiveLine | null;
  error: UiError | null;
  /** The export format. */
  format: string;
  /** Where the last export was saved. */
  exported: string | null;
  /** Segments' text as typed, by index, until saved. */
  drafts: Record<number, string>;
};

export const initialState: State = {
  path: "",
  progress: 0,
  time: null,
  level: null,
  live: true,
  liveFinals: [],
  livePartial: null,
  error: null,
  format: "srt",
  exported: null,
  drafts: {},
};

export type Action =
  | { type: "path"; path: string }
  | { type: "live"; live: boolean }
  | { type: "format"; format: string }
  /** The view's error set (`null`: cleared, as each action starts or on Dismiss). */
  | { type: "error"; error: UiError | null }
  | { type: "transcribe-started" }
  | { type: "progress"; progress: number; time: JobTime | null }
  | { type: "record-started" }
  | { type: "level"; dbfs: number }
  | { type: "live-transcript"; partial: LiveLine | null; finals: LiveLine[] }
  /** The recording ended (saved, cancelled or failed). */
  | { type: "record-stopped" }
  /** The recording was saved to `file`; `transcribed`: live, so its transcript is the project's. */
  | { type: "recorded"; file: string; transcribed: boolean }
  | { type: "exported"; path: string }
  | { type: "draft"; index: number; text: string }
  /** `text` was saved for segment `index`: its draft goes, unless typed on since. */
  | { type: "draft-saved"; index: number; text: string };

export function reducer(state: State, action: Action): State {
  switch (action.type) {
    case "path":
      return { ...state, path: action.path };
    case "live":
      return { ...state, live: action.live };
    case "format":
      return { ...state, format: action.format };
    case "error":
      return { ...state, error: action.error };
    case "transcribe-started":
      return { ...state, progress: 0, time: null, error: null, exported: null };
    case "progress":
      return { ...state, progress: action.progress, time: action.time };
    case "record-started":
      return { ...state, error: null, liveFinals: [], livePartial: null };
    case "level":
      return { ...state, level: action.dbfs };
    case "live-transcript":
      return action.partial
        ? { ...state, livePartial: action.partial }
        : { ...state, livePartial: null, liveFinals: [...state.liveFinals, ...action.finals] };
    case "record-stopped":
      return { ...state, level: null, livePartial: null };
    case "recorded":
      return { ...state, path: action.file, liveFinals: action.transcribed ? [] : state.liveFinals };
    case "exported":
      return { ...state, exported: action.path };
    case "draft":
      return { ...state, drafts: { ...state.drafts, [action.index]: action.text } };
    case "draft-saved": {
      if (state.drafts[action.index] !== action.text) return state;
      const { [action.index]: _saved, ...drafts } = state.drafts;
      return { ...state, drafts };
    }
  }
}

/** The segments whose text holds `query` (any case), in order. */
export function segmentsMatching(texts: string[], query: string): number[] {
  const q = query.trim().toLocaleLowerCase();
  if (q === "") return [];
  const found: number[] = [];
  texts.forEach((text, i) => {
    if (text.toLocaleLowerCase().includes(q)) found.push(i);
  });
  return found;
}

/** A time in the recording as `mm:ss.s`. */
export function formatTime(seconds: number): string {
  const m = Math.floor(seconds / 60);
  const s = seconds - m * 60;
  return `${String(m).padStart(2, "0")}:${s.toFixed(1).padStart(4, "0")}`;
}

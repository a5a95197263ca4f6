// The Narration view's state: the saved narration and each segment's state as the run goes,
// the choices for the next run, its progress and summary, the A/B side and the last export.
// Every change is an `Action`; `reducer` says what each does. (The running job is tracked by
// `useJob`, the view's error by `useGuarded`.)
import type {
  FailurePolicy,
  LanguageView,
  NarratedSegment,
  NarrationMode,
  NarrationOptions,
  NarrationSummary,
  NarrationView,
  ProjectSettings,
  SegmentState,
  Voice,
} from "../api";

/** Which recording a segment plays: A, the original, or B, the narration. */
export type Side = "original" | "narration";

/** The choices for the next run. */
export type Choices = {
  mode: NarrationMode;
  /** The language translated into. */
  language: string;
  /** The voice ("": the project's). */
  voice: string;
  policy: FailurePolicy;
  mix: boolean;
  /** The voice chosen for each speaker ("": their default, which the view names). */
  speakerVoices: Record<string, string>;
};

export type State = {
  view: NarrationView | null;
  /** Each segment's state, updated as the run reports it. */
  states: SegmentState[];
  /** Each segment's saved narration, updated as the run saves it. */
  segments: (NarratedSegment | null)[];
  languages: LanguageView[];
  voices: Voice[];
  choices: Choices;
  /** The running narration's segments done, of those it plans. */
  progress: { done: number; of: number } | null;
  /** The last run's outcome. */
  summary: NarrationSummary | null;
  side: Side;
  /** Where the narration's WAV was last exported. */
  exported: string | null;
};

/** Before the project's narration is loaded: the project's cleanup mode and failure policy. */
export function initialState(settings: ProjectSettings): State {
  return {
    view: null,
    states: [],
    segments: [],
    languages: [],
    voices: [],
    choices: {
      mode: settings.cleanup_mode,
      language: "es",
      voice: "",
      policy: settings.failure_policy,
      mix: false,
      speakerVoices: {},
    },
    progress: null,
    summary: null,
    side: "original",
    exported: null,
  };
}

export type Action =
  /** The project's narration loaded; with `restore`, the choices become its last run's. */
  | { type: "loaded"; view: NarrationView; restore: boolean }
  | { type: "languages-loaded"; languages: LanguageView[] }
  | { type: "voices-loaded"; voices: Voice[] }
  | { type: "mode"; mode: NarrationMode }
  | { type: "language"; language: string }
  | { type: "voice"; voice: string }
  | { type: "policy"; policy: FailurePolicy }
  | { type: "mix"; mix: boolean }
  | { type: "speaker-voice"; speaker: string; voice: string }
  | { type: "side"; side: Side }
  | { type: "run-started" }
  /** The run planned `count` segments. */
  | { type: "planned"; count: number }
  /** Segment `index` reached `state` (`done` of `of` finished). */
  | { type: "segment"; index: number; state: SegmentState; segment: NarratedSegment; done: number; of: number }
  | { type: "run-finished"; summary: NarrationSummary }
  /** The run ended (finished, refused or cancelled): no progress is shown. */
  | { type: "run-ended" }
  | { type: "exported"; path: string };

const set = <T>(items: T[], index: number, item: T): T[] => {
  const next = [...items];
  next[index] = item;
  return next;
};

export function reducer(state: State, action: Action): State {
  const choose = (change: Partial<Choices>): State => ({ ...state, choices: { ...state.choices, ...change } });
  switch (action.type) {
    case "loaded": {
      const { view } = action;
      const loaded = { ...state, view, states: view.states, segments: view.narration?.segments ?? [] };
      const last = view.narration?.settings;
      if (!action.restore || !last) return loaded;
      return {
        ...loaded,
        choices: {
          mode: last.mode,
          language: last.mode === "translate" ? last.language : state.choices.language,
          voice: last.voice ?? "",
          policy: last.policy,
          mix: last.mix,
          speakerVoices: { ...(last.speaker_voices ?? {}) },
        },
      };
    }
    case "languages-loaded":
      return { ...state, languages: action.languages };
    case "voices-loaded":
      return { ...state, voices: action.voices };
    case "mode":
      return choose({ mode: action.mode });
    case "language":
      return choose({ language: action.language });
    case "voice":
      return choose({ voice: action.voice });
    case "policy":
      return choose({ policy: action.policy });
    case "mix":
      return choose({ mix: action.mix });
    case "speaker-voice":
      return choose({ speakerVoices: { ...state.choices.speakerVoices, [action.speaker]: action.voice } });
    case "side":
      return { ...state, side: action.side };
    case "run-started":
      return { ...state, summary: null };
    case "planned":
      return { ...state, progress: { done: 0, of: action.count } };
    case "segment":
      return {
        ...state,
        states: set(state.states, action.index, action.state),
        // A synthesized take is not saved yet: keep the saved segment until it is.
        segments: action.state.state === "synthesized" ? state.segments : set(state.segments, action.index, action.segment),
        progress: { done: action.done, of: action.of },
      };
    case "run-finished":
      return { ...state, summary: action.summary };
    case "run-ended":
      return { ...state, progress: null };
    case "exported":
      return { ...state, exported: action.path };
  }
}

/** What to ask the shell for, from the choices. */
export function narrationOptions(state: State): NarrationOptions {
  const { mode, language, voice, policy, mix, speakerVoices } = state.choices;
  return {
    mode,
    to: mode === "translate" ? language : null,
    voice: voice === "" ? null : voice,
    policy,
    mix,
    // Every speaker's choice, so one set back to its default is cleared too.
    speaker_voices: Object.fromEntries((state.view?.speakers ?? []).map((v) => [v.speaker, speakerVoices[v.speaker] ?? ""])),
  };
}

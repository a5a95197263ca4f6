// The Clean up view's state: which segments are being cleaned (by which job), the text model's
// words streaming in for each, the refusals shown at the segment they hit (-1: the whole
// transcript), and the clean-all job while it runs. Every change is an `Action`; `reducer`
// says what each does.
import type { UiError } from "../api";

/** Where an error not of one segment is shown. */
export const ALL = -1;

export type State = {
  /** The text streamed so far, by segment being cleaned. */
  streams: Record<number, string>;
  /** The job cleaning each segment. */
  running: Record<number, string>;
  /** Refusals and errors by segment (`ALL`: the whole transcript). */
  errors: Record<number, UiError>;
  /** The clean-all job's id while it runs. */
  batch: string | null;
};

export const initialState: State = { streams: {}, running: {}, errors: {}, batch: null };

export type Action =
  /** One segment's cleanup started as `job`. */
  | { type: "segment-started"; index: number; job: string }
  /** A segment's cleanup ended (saved, refused or cancelled). */
  | { type: "segment-ended"; index: number }
  /** An error to show at a segment (`ALL`: above the list). */
  | { type: "failed"; index: number; error: UiError }
  | { type: "dismissed"; index: number }
  /** The text model started a segment's chunk again: what it streamed is dropped. */
  | { type: "stream-restarted"; index: number }
  | { type: "delta"; index: number; text: string }
  | { type: "batch-started"; job: string }
  /** The clean-all job finished segment `index` of `count` (refused: with `error`). */
  | { type: "batch-progress"; job: string; index: number; count: number; error: UiError | null }
  /** The clean-all job failed as a whole; cancelling it is not an error. */
  | { type: "batch-failed"; error: UiError }
  | { type: "batch-ended" };

function without<T>(map: Record<number, T>, index: number): Record<number, T> {
  const { [index]: _, ...rest } = map;
  return rest;
}

export function reducer(state: State, action: Action): State {
  switch (action.type) {
    case "segment-started":
      return {
        ...state,
        running: { ...state.running, [action.index]: action.job },
        streams: { ...state.streams, [action.index]: "" },
        errors: without(state.errors, action.index),
      };
    case "segment-ended":
      return {
        ...state,
        running: without(state.running, action.index),
        streams: without(state.streams, action.index),
      };
    case "failed":
      return { ...state, errors: { ...state.errors, [action.index]: action.error } };
    case "dismissed":
      return { ...state, errors: without(state.errors, action.index) };
    case "stream-restarted":
      return { ...state, streams: { ...state.streams, [action.index]: "" } };
    case "delta":
      return { ...state, streams: { ...state.streams, [action.index]: (state.streams[action.index] ?? "") + action.text } };
    case "batch-started":
      // One segment at a time, from the first.
      return { ...state, batch: action.job, errors: {}, running: { 0: action.job }, streams: { 0: "" } };
    case "batch-progress": {
      const next = action.index + 1;
      const more = next < action.count;
      return {
        ...state,
        running: more ? { [next]: action.job } : {},
        streams: more ? { ...state.streams, [next]: "" } : state.streams,
        errors: action.error ? { ...state.errors, [action.index]: action.error } : state.errors,
      };
    }
    case "batch-failed":
      return action.error.kind === "cancelled" ? state : { ...state, errors: { ...state.errors, [ALL]: action.error } };
    case "batch-ended":
      return { ...state, batch: null, running: {} };
  }
}

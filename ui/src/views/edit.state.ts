// Editing the recording by its words, the parts with no window in them: word ids and the
// selection over them, what Delete asks, the stretches cut (for the waveform), and undo/redo
// as a history of the edit's intents.
import type { EditChange, EditIntent, EditList } from "../bindings";

/** A word by its place: segment and word, both from 0 (its id, `SEGMENT:WORD`, counts from 1). */
export type WordAt = { segment: number; word: number };

/** The id every front end names a word by. */
export function wordId(at: WordAt): string {
  return `${at.segment + 1}:${at.word + 1}`;
}

function compare(a: WordAt, b: WordAt): number {
  return a.segment - b.segment || a.word - b.word;
}

/** The words selected: from where the selection started (`anchor`) to where it is now. */
export type Selection = { anchor: WordAt; focus: WordAt };

/** The selection's first and last word, in order. */
export function selectionBounds(s: Selection): [WordAt, WordAt] {
  return compare(s.anchor, s.focus) <= 0 ? [s.anchor, s.focus] : [s.focus, s.anchor];
}

export function isSelected(s: Selection | null, at: WordAt): boolean {
  if (s === null) return false;
  const [first, last] = selectionBounds(s);
  return compare(first, at) <= 0 && compare(at, last) <= 0;
}

/** The selection as the run `FIRST-LAST` (or one id) that a change names. */
export function selectionRun(s: Selection): string {
  const [first, last] = selectionBounds(s);
  return compare(first, last) === 0 ? wordId(first) : `${wordId(first)}-${wordId(last)}`;
}

/** What Delete asks of the selection: words all cut already come back (kept), else they are
 * cut. `known` is the selected words the view has (those of rows drawn), `cut` the ids cut. */
export function deleteChange(s: Selection, known: WordAt[], cut: ReadonlySet<string>): EditChange {
  const run = selectionRun(s);
  const allCut = known.length > 0 && known.every((w) => cut.has(wordId(w)));
  return allCut ? change({ keep: [run] }) : change({ strike: [run] });
}

/** A change asking only what `asks` says. */
export function change(asks: Partial<EditChange>): EditChange {
  return {
    cut_fillers: null,
    max_pause: null,
    room_tone: null,
    cuts: [],
    strike: [],
    keep: [],
    clear: false,
    ...asks,
  };
}

/** The stretches of a recording `duration` long that `list` leaves out, in order. */
export function cutStretches(list: EditList | null | undefined, duration: number): [number, number][] {
  if (!list) return [];
  const cuts: [number, number][] = [];
  let at = 0;
  for (const r of list.kept) {
    if (r.start > at + 1e-6) cuts.push([at, r.start]);
    at = Math.max(at, r.end);
  }
  if (list.kept.length > 0 && duration > at + 1e-3) cuts.push([at, duration]);
  return cuts;
}

/** The edit's history for undo and redo: each entry the intent the edit had (`null`: none). */
export type History = { past: (EditIntent | null)[]; future: (EditIntent | null)[] };

export const emptyHistory: History = { past: [], future: [] };

/** Undo goes back this far. */
export const HISTORY_KEPT = 100;

/** The history after a change made from `before`: redo has nothing left. */
export function changed(h: History, before: EditIntent | null): History {
  return { past: [...h.past, before].slice(-HISTORY_KEPT), future: [] };
}

/** Undo (`back`) or redo: the intent to go to and the history once it is reached, from the
 * edit's intent `now`; `null` when there is nothing that way. */
export function step(
  h: History,
  now: EditIntent | null,
  back: boolean,
): { to: EditIntent | null; history: History } | null {
  const from = back ? h.past : h.future;
  if (from.length === 0) return null;
  const to = from[from.length - 1];
  const rest = from.slice(0, -1);
  return back
    ? { to, history: { past: rest, future: [...h.future, now] } }
    : { to, history: { past: [...h.past, now].slice(-HISTORY_KEPT), future: rest } };
}

/** The change that makes the edit's intent `to` (`null`: no edit). */
export function changeTo(to: EditIntent | null): EditChange {
  return to === null ? change({ clear: true }) : change({ from: to });
}

/** The word `by` places from `at` within a segment of `count` words (arrows, Home, End),
 * or `null` for a key that moves nothing. */
export function moved(key: string, at: number, count: number): number | null {
  switch (key) {
    case "ArrowRight":
      return Math.min(at + 1, count - 1);
    case "ArrowLeft":
      return Math.max(at - 1, 0);
    case "Home":
      return 0;
    case "End":
      return count - 1;
    default:
      return null;
  }
}

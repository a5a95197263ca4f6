// A list that renders only the rows on screen and a screenful beside them: a three-hour
// transcript has thousands of segments, and rendering each (a text field, a speaker choice,
// tools) makes opening the view, scrolling and every keystroke wait on all of them. The list
// scrolls with the view (its scrolling ancestor), not in a box of its own; rows not rendered
// are stood in for by padding of their measured (or, until seen, estimated) height.
import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";

/** Lists this long or shorter render every row: as quick, and every row is there to find. */
export const RENDER_ALL_UP_TO = 60;
/** Rendered beyond each edge of the view, so a fast scroll or a Tab lands on a row. */
const OVERSCAN_PX = 800;

/** Rows `from` (included) to `to` (excluded). */
export type Range = { from: number; to: number };

/** The rows' heights: measured once shown, estimated until then; with their offsets. */
export class RowHeights {
  private heights: Float64Array;
  private known: Uint8Array;
  private offsetsCache: Float64Array | null = null;

  constructor(count: number, estimate: number, before?: RowHeights) {
    this.heights = new Float64Array(count).fill(estimate);
    this.known = new Uint8Array(count);
    if (before) {
      const kept = Math.min(count, before.heights.length);
      this.heights.set(before.heights.subarray(0, kept));
      this.known.set(before.known.subarray(0, kept));
    }
  }

  get count(): number {
    return this.heights.length;
  }

  /** Records a row's measured height; whether it changed what was assumed. */
  set(index: number, height: number): boolean {
    if (index < 0 || index >= this.heights.length || !(height > 0)) return false;
    const changed = Math.abs(this.heights[index] - height) > 0.5;
    this.known[index] = 1;
    if (changed) {
      this.heights[index] = height;
      this.offsetsCache = null;
    }
    return changed;
  }

  /** Where each row starts, and (last) the list's whole height: `count + 1` values. */
  offsets(): Float64Array {
    if (this.offsetsCache === null) {
      const offsets = new Float64Array(this.heights.length + 1);
      for (let i = 0; i < this.heights.length; i++) offsets[i + 1] = offsets[i] + this.heights[i];
      this.offsetsCache = offsets;
    }
    return this.offsetsCache;
  }
}

/** The rows that cover `[top, bottom)` of a list whose rows start at `offsets` (with the
 * list's height last): at least one row when there are any. */
export function rowsCovering(offsets: ArrayLike<number>, top: number, bottom: number): Range {
  const count = offsets.length - 1;
  if (count <= 0) return { from: 0, to: 0 };
  // The last row starting at or before `top`.
  let lo = 0;
  let hi = count - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (offsets[mid] <= top) lo = mid;
    else hi = mid - 1;
  }
  const from = lo;
  // The first row starting at or after `bottom`.
  lo = from + 1;
  hi = count;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (offsets[mid] >= bottom) hi = mid;
    else lo = mid + 1;
  }
  return { from, to: Math.max(lo, from + 1) };
}

/** The nearest ancestor that scrolls (the view's content area), else the page. */
function scrollingAncestor(element: HTMLElement): HTMLElement {
  for (let e = element.parentElement; e !== null; e = e.parentElement) {
    const overflow = getComputedStyle(e).overflowY;
    if (overflow === "auto" || overflow === "scroll") return e;
  }
  return (document.scrollingElement as HTMLElement | null) ?? document.documentElement;
}

/** The rows a list has on screen, for what draws beside it (a waveform marks those): held
 * apart from the view, so a scroll draws those again, not the whole view. */
export type RangeStore = {
  get: () => Range | undefined;
  set: (range: Range) => void;
  subscribe: (listener: () => void) => () => void;
};

export function useRangeStore(): RangeStore {
  return useMemo(() => {
    let range: Range | undefined;
    const listeners = new Set<() => void>();
    return {
      get: () => range,
      set: (next: Range) => {
        if (range !== undefined && range.from === next.from && range.to === next.to) return;
        range = next;
        listeners.forEach((l) => l());
      },
      subscribe: (listener: () => void) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
  }, []);
}

/** The rows on screen as `store` holds them (none: `undefined`), drawn again as they change. */
export function useRange(store: RangeStore | undefined): Range | undefined {
  const [range, setRange] = useState(() => store?.get());
  useEffect(() => {
    if (store === undefined) return;
    setRange(store.get());
    return store.subscribe(() => setRange(store.get()));
  }, [store]);
  return range;
}

/** A request to bring row `index` on screen; a new `seq` asks again for the same row. */
export type Reveal = { index: number; seq: number };

export function VirtualList(props: {
  testid: string;
  class?: string;
  count: number;
  /** A row's height in pixels before it is measured. */
  estimate: number;
  /** Row `index`: one `<li>` (the list measures its children in order). */
  row: (index: number) => ComponentChildren;
  reveal?: Reveal | null;
  /** Called once a revealed row is on screen (to focus it, say). */
  onRevealed?: (index: number) => void;
  /** Told the rendered rows as they change (a waveform marks only those, say). */
  rangeStore?: RangeStore;
}) {
  const { count } = props;
  const all = count <= RENDER_ALL_UP_TO;
  const list = useRef<HTMLOListElement>(null);
  const heights = useRef(new RowHeights(count, props.estimate));
  if (heights.current.count !== count) heights.current = new RowHeights(count, props.estimate, heights.current);
  // Until the list is laid out: the rows a window's height holds.
  const [range, setRange] = useState<Range>(() => ({
    from: 0,
    to: Math.min(count, Math.ceil(window.innerHeight / props.estimate) + 2),
  }));
  const scroller = useRef<HTMLElement | null>(null);

  const shown = (): Range => {
    const ol = list.current;
    const scroll = scroller.current;
    if (all || ol === null || scroll === null) return { from: 0, to: count };
    const listTop = ol.getBoundingClientRect().top - scroll.getBoundingClientRect().top + scroll.scrollTop;
    const top = scroll.scrollTop - listTop;
    return rowsCovering(heights.current.offsets(), top - OVERSCAN_PX, top + scroll.clientHeight + OVERSCAN_PX);
  };
  const update = () => {
    const next = shown();
    setRange((now) => (now.from === next.from && now.to === next.to ? now : next));
  };

  useEffect(() => {
    if (list.current === null) return;
    const scroll = scrollingAncestor(list.current);
    scroller.current = scroll;
    let frame = 0;
    const onScroll = () => {
      if (frame === 0)
        frame = requestAnimationFrame(() => {
          frame = 0;
          update();
        });
    };
    const target: HTMLElement | Window = scroll === document.scrollingElement ? window : scroll;
    target.addEventListener("scroll", onScroll, { passive: true });
    const resized = new ResizeObserver(onScroll);
    resized.observe(scroll);
    update();
    return () => {
      target.removeEventListener("scroll", onScroll);
      resized.disconnect();
      cancelAnimationFrame(frame);
    };
  }, [count, all]);

  const from = all ? 0 : Math.min(range.from, count);
  const to = all ? count : Math.min(range.to, count);

  // Measures the rows just drawn; where they differ from what was assumed, the padding and the
  // rows shown follow.
  useLayoutEffect(() => {
    const ol = list.current;
    if (ol === null || all) return;
    const rows = Array.from(ol.children) as HTMLElement[];
    let changed = false;
    rows.forEach((row, k) => {
      const next = rows[k + 1];
      const height = next !== undefined ? next.offsetTop - row.offsetTop : row.offsetHeight;
      changed = heights.current.set(from + k, height) || changed;
    });
    if (changed) update();
  });

  useEffect(() => {
    props.rangeStore?.set({ from, to });
  }, [from, to]);

  // Brings a row on screen: scrolled to where its estimate puts it (so it is rendered), then
  // to where it is once drawn.
  const revealed = useRef<number | null>(null);
  useLayoutEffect(() => {
    const reveal = props.reveal;
    const ol = list.current;
    const scroll = scroller.current;
    if (!reveal || revealed.current === reveal.seq || ol === null || scroll === null) return;
    if (reveal.index < 0 || reveal.index >= count) return;
    const row = ol.querySelector<HTMLElement>(`:scope > [data-index='${reveal.index}']`);
    if (row !== null) {
      revealed.current = reveal.seq;
      row.scrollIntoView({ block: "center" });
      props.onRevealed?.(reveal.index);
      return;
    }
    const listTop = ol.getBoundingClientRect().top - scroll.getBoundingClientRect().top + scroll.scrollTop;
    scroll.scrollTop = listTop + heights.current.offsets()[reveal.index] - scroll.clientHeight / 3;
    update();
  });

  const offsets = heights.current.offsets();
  const rows: ComponentChildren[] = [];
  for (let i = from; i < to; i++) rows.push(props.row(i));
  return (
    <ol
      ref={list}
      class={props.class}
      data-testid={props.testid}
      data-count={count}
      data-from={from}
      data-to={to}
      start={from + 1}
      style={all ? undefined : { paddingTop: `${offsets[from]}px`, paddingBottom: `${offsets[count] - offsets[to]}px` }}
    >
      {rows}
    </ol>
  );
}

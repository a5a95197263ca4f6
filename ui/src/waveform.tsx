// A recording's waveform with its segments as regions: clicking a region plays that segment,
// and the playing one is highlighted (here and, through `playing`, in the view's text).
import { memo } from "preact/compat";
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, asUiError, jobId, type UiError, type Waveform as Peaks } from "./api";
import { formatNumber, onLocaleChange, t } from "./i18n";
import { type RangeStore, useRange } from "./virtual";
import { ErrorNotice } from "./rejection";

/** Peaks fetched per waveform: about one per 2 px of a wide window. */
const BUCKETS = 600;
const HEIGHT = 64;
/** Up to this many segments, each is a control on the waveform and its speaker's lane; past
 * it (an hours-long transcript), all are drawn as one shape and those whose rows are on
 * screen (`shown`) are the controls, with the focused and the playing one. */
export const MAX_SEGMENT_CONTROLS = 200;

/** The segments to make controls of: all when few; else those shown, the active one and the
 * playing one. Until the list has said which rows it shows (`shown` undefined: the first
 * frame of a view), a long transcript's are the active and the playing one alone: the rows
 * shown come in the same frame's effects, and two hundred controls made for that one frame
 * and then removed were most of the time a three-hour project took to open. */
export function segmentControls(
  count: number,
  shown: { from: number; to: number } | undefined,
  ...also: (number | null)[]
): number[] {
  if (count <= MAX_SEGMENT_CONTROLS) return Array.from({ length: count }, (_, i) => i);
  const picked = new Set<number>();
  if (shown !== undefined) {
    const from = Math.max(0, shown.from);
    const to = Math.min(count, shown.to, from + MAX_SEGMENT_CONTROLS);
    for (let i = from; i < to; i++) picked.add(i);
  }
  for (const i of also) if (i !== null && i >= 0 && i < count) picked.add(i);
  return [...picked].sort((a, b) => a - b);
}

/** Spans `[start, end]` (in order of start) joined where less than `gap` apart: at the
 * drawing's resolution, thousands of segments are a few shapes, not thousands. */
export function joinedSpans(spans: [number, number][], gap: number): [number, number][] {
  const joined: [number, number][] = [];
  for (const [start, end] of spans) {
    const last = joined[joined.length - 1];
    if (last !== undefined && start - last[1] < gap) last[1] = Math.max(last[1], end);
    else joined.push([start, end]);
  }
  return joined;
}

/** Spans `[start, end]` (in order of start), joined where less than `gap` apart, as one SVG
 * path of rectangles `height` tall from the top. */
function joinedPath(spans: [number, number][], gap: number, height: number): string {
  return joinedSpans(spans, gap)
    .map(([a, b]) => `M${a.toFixed(3)} 0h${(b - a).toFixed(3)}v${height}h${(a - b).toFixed(3)}z`)
    .join("");
}

/** `f` as a function that stays the same across renders and always calls the latest `f`: a
 * memoized drawing is then drawn again only when what it draws changes (a keystroke in a
 * segment must not draw thousands of regions again), and still calls what the view passes
 * now (the side chosen in Narration, say). */
function useLatest<A extends unknown[]>(f: (...args: A) => void): (...args: A) => void {
  const latest = useRef(f);
  latest.current = f;
  return useCallback((...args: A) => latest.current(...args), []);
}

/** A segment on the waveform; `state` (a code, for styling) with `label`, the state in words. */
export type Region = { start: number; end: number; state?: string; label?: string };

/** Plays `[start, end)` of a project file, marking region `index` as playing meanwhile. */
export function usePlayer(project: string) {
  const [playing, setPlaying] = useState<string | null>(null);
  // The last stretch started, kept after it ends (a short segment may end before it paints).
  const [last, setLast] = useState<string | null>(null);
  const [error, setError] = useState<UiError | null>(null);
  const play = async (key: string, file: string, start: number, end: number) => {
    setError(null);
    setPlaying(key);
    setLast(key);
    try {
      await api.playRange(project, file, start, end, jobId("play"));
    } catch (e) {
      setError(asUiError(e));
    } finally {
      setPlaying((now) => (now === key ? null : now));
    }
  };
  return { playing, last, play, error, clearError: () => setError(null) };
}

type WaveformProps = {
  testid: string;
  project: string;
  file: string;
  /** Refetch when this changes (the file was written again). */
  version?: string | number;
  regions: Region[];
  playing: number | null;
  onRegion: (index: number) => void;
  /** The segments whose rows are on screen (see `MAX_SEGMENT_CONTROLS`). */
  shown?: RangeStore;
  /** Stretches the edit of the recording leaves out, `[start, end]` in seconds, in order:
   * shown struck through (keep the array the same while they are). */
  cuts?: [number, number][];
};

export function Waveform(props: WaveformProps) {
  return <WaveformMemo {...props} onRegion={useLatest(props.onRegion)} />;
}

const WaveformMemo = memo(WaveformDrawing);

/** Draws again in another language (a memoized drawing is not drawn with its parent). */
function useLocaleChanges() {
  const [, setDrawn] = useState(0);
  useEffect(() => onLocaleChange(() => setDrawn((n) => n + 1)), []);
}

/** The waveforms drawn last, by project, file and version: reopening a project draws its
 * waveform at once while it is fetched again (the file may have changed). */
const drawnPeaks = new Map<string, Peaks>();
const DRAWN_KEPT = 4;

function WaveformDrawing(props: WaveformProps) {
  useLocaleChanges();
  const shown = useRange(props.shown);
  const key = `${props.project}\u0000${props.file}\u0000${props.version ?? ""}`;
  const [peaks, setPeaks] = useState<Peaks | null>(() => drawnPeaks.get(key) ?? null);
  const [error, setError] = useState<UiError | null>(null);
  // One Tab stop for the whole waveform; the arrow keys move between its segments.
  const [active, setActive] = useState(0);
  // A segment reached by the keyboard that was not a control yet gets the focus once drawn.
  const focusNext = useRef<number | null>(null);
  const svg = useRef<SVGSVGElement>(null);
  useEffect(() => {
    const to = focusNext.current;
    if (to === null) return;
    focusNext.current = null;
    svg.current?.querySelector<SVGElement>(`[data-index='${to}']`)?.focus();
  });
  // Asked for as the waveform is laid out, not after the first paint: the answer is then in
  // the frame after it.
  useLayoutEffect(() => {
    setError(null);
    setPeaks(drawnPeaks.get(key) ?? null);
    let current = true;
    api.waveform(props.project, props.file, BUCKETS).then(
      (fetched) => {
        const kept = drawnPeaks.get(key);
        const same =
          kept !== undefined &&
          kept.duration_secs === fetched.duration_secs &&
          kept.peaks.length === fetched.peaks.length &&
          kept.peaks.every((p, i) => p === fetched.peaks[i]);
        drawnPeaks.delete(key);
        drawnPeaks.set(key, same ? kept : fetched);
        if (drawnPeaks.size > DRAWN_KEPT) drawnPeaks.delete(drawnPeaks.keys().next().value as string);
        // The same peaks as drawn from the kept ones: nothing to draw again.
        if (current && !same) setPeaks(fetched);
      },
      (e) => current && setError(asUiError(e)),
    );
    return () => {
      current = false;
    };
  }, [key]);
  const width = Math.max(peaks?.peaks.length ?? 0, 1);
  const duration = Math.max(peaks?.duration_secs ?? 0, 1e-6);
  const x = (t: number) => (t / duration) * width;
  const many = props.regions.length > MAX_SEGMENT_CONTROLS;
  // Drawn again when the peaks or the segments change, not as the rows shown do (a scroll).
  const peakPath = useMemo(
    () =>
      (peaks?.peaks ?? [])
        .map((p, i) => {
          const h = Math.max(p * HEIGHT, 0.5);
          return `M${i} ${((HEIGHT - h) / 2).toFixed(2)}h1v${h.toFixed(2)}h-1z`;
        })
        .join(""),
    [peaks],
  );
  const allRegions = useMemo(
    () =>
      many
        ? joinedPath(
            props.regions.map((r) => [x(r.start), x(r.start) + Math.max(x(r.end) - x(r.start), 0.5)]),
            0.5,
            HEIGHT,
          )
        : "",
    [props.regions, width, duration, many],
  );
  const cutPath = useMemo(
    () =>
      joinedPath(
        (props.cuts ?? []).map(([a, b]) => [x(a), x(a) + Math.max(x(b) - x(a), 0.5)]),
        0.25,
        HEIGHT,
      ),
    [props.cuts, width, duration],
  );
  if (error) return <ErrorNotice scope={props.testid} error={error} onDismiss={() => setError(null)} />;
  if (!peaks) return <div class="waveform loading" data-testid={`${props.testid}-loading`} />;
  const last = props.regions.length - 1;
  const current = Math.min(active, Math.max(last, 0));
  const onKeyDown = (e: KeyboardEvent) => {
    // Alt+Left and the like belong to the system.
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const target = (e.target as Element).getAttribute("data-index");
    if (target === null) return;
    const at = Number(target);
    const to =
      e.key === "ArrowRight" || e.key === "ArrowDown"
        ? Math.min(at + 1, last)
        : e.key === "ArrowLeft" || e.key === "ArrowUp"
          ? Math.max(at - 1, 0)
          : e.key === "Home"
            ? 0
            : e.key === "End"
              ? last
              : null;
    if (to !== null) {
      e.preventDefault();
      setActive(to);
      const drawn = (e.currentTarget as SVGElement).querySelector<SVGElement>(`[data-index='${to}']`);
      if (drawn) drawn.focus();
      else focusNext.current = to;
    } else if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      props.onRegion(at);
    }
  };
  const controls = segmentControls(props.regions.length, shown, current, props.playing);
  return (
    <svg
      ref={svg}
      class="waveform"
      data-testid={props.testid}
      data-duration={peaks.duration_secs.toFixed(3)}
      data-segments={props.regions.length}
      viewBox={`0 0 ${width} ${HEIGHT}`}
      preserveAspectRatio="none"
      role="group"
      aria-label={t("waveform.label")}
      onKeyDown={onKeyDown}
    >
      {many && <path class="region all" aria-hidden="true" d={allRegions} />}
      {controls.map((i) => {
        const r = props.regions[i];
        const name = [
          t("waveform.segment", { n: i + 1, start: formatNumber(r.start, 1), end: formatNumber(r.end, 1) }),
          r.label,
        ]
          .filter((part) => !!part)
          .join(" · ");
        return (
          <rect
            key={i}
            data-testid={`${props.testid}-region-${i}`}
            data-index={i}
            data-state={r.state ?? ""}
            class={`region${props.playing === i ? " playing" : ""}${r.state ? ` ${r.state}` : ""}`}
            x={x(r.start)}
            width={Math.max(x(r.end) - x(r.start), 1)}
            y={0}
            height={HEIGHT}
            role="button"
            // Lower case: on an SVG element Preact sets the attribute as written.
            tabindex={i === current ? 0 : -1}
            aria-label={name}
            aria-current={props.playing === i ? "true" : undefined}
            onFocus={() => setActive(i)}
            onClick={() => {
              setActive(i);
              props.onRegion(i);
            }}
          >
            <title>{name}</title>
          </rect>
        );
      })}
      <path class="peak" d={peakPath} />
      {(props.cuts ?? []).length > 0 && (
        <path
          class="cut"
          data-testid={`${props.testid}-cuts`}
          data-count={(props.cuts ?? []).length}
          aria-hidden="true"
          d={cutPath}
        />
      )}
    </svg>
  );
}

/** A speaker's lane: who they are and the segments they speak. */
export type SpeakerLane = {
  id: string;
  name: string;
  segments: { index: number; start: number; end: number }[];
};

/** Speakers' colours, in order of first speech; each lane also carries the speaker's name
 * (colour is never the only signal). */
export const SPEAKER_COLORS = [
  "#0969da",
  "#bf3989",
  "#1a7f37",
  "#bc4c00",
  "#8250df",
  "#9a6700",
  "#0550ae",
  "#cf222e",
  "#116329",
  "#6e7781",
];

/** Lanes under a waveform, one per speaker: the speaker's name, then their segments in their
 * colour on the same time axis. Clicking a segment plays it, as on the waveform. */
type SpeakerLanesProps = {
  testid: string;
  duration: number;
  lanes: SpeakerLane[];
  playing: number | null;
  onRegion: (index: number) => void;
  /** The segments whose rows are on screen (see `MAX_SEGMENT_CONTROLS`). */
  shown?: RangeStore;
  /** Stretches the edit of the recording leaves out, `[start, end]` in seconds, in order:
   * shown struck through (keep the array the same while they are). */
  cuts?: [number, number][];
};

export function SpeakerLanes(props: SpeakerLanesProps) {
  return <SpeakerLanesMemo {...props} onRegion={useLatest(props.onRegion)} />;
}

const SpeakerLanesMemo = memo(SpeakerLanesDrawing);

function SpeakerLanesDrawing(props: SpeakerLanesProps) {
  useLocaleChanges();
  const shown = useRange(props.shown);
  const duration = Math.max(props.duration, 1e-6);
  const pct = (t: number) => `${((t / duration) * 100).toFixed(3)}%`;
  const count = props.lanes.reduce((n, lane) => n + lane.segments.length, 0);
  const many = count > MAX_SEGMENT_CONTROLS;
  const controls = new Set(segmentControls(count, shown, props.playing));
  // A turn is at least 1/500 of the lane wide, so a short one can be seen and clicked.
  const width = (s: { start: number; end: number }) => Math.max(s.end - s.start, duration / 500);
  // Each lane's turns as one shape, drawn again when the turns change, not as the rows shown do.
  const lanePaths = useMemo(
    () =>
      many
        ? props.lanes.map((lane) =>
            joinedPath(
              lane.segments.map((s) => [s.start, s.start + width(s)]),
              duration / 2000,
              1,
            ),
          )
        : [],
    [props.lanes, duration, many],
  );
  return (
    <div class="speaker-lanes" data-testid={props.testid} role="group" aria-label={t("speakerLanes.label")}>
      {props.lanes.map((lane, k) => {
        const color = SPEAKER_COLORS[k % SPEAKER_COLORS.length];
        return (
          <div class="speaker-lane" key={lane.id} data-testid={`speaker-lane-${lane.id}`} data-name={lane.name}>
            <span class="speaker-lane-name" data-testid={`speaker-lane-name-${lane.id}`}>
              <span class="swatch" style={{ background: color }} aria-hidden="true" />
              {lane.name}
            </span>
            <div class="speaker-lane-track">
              {many && (
                <svg class="speaker-lane-all" viewBox={`0 0 ${duration} 1`} preserveAspectRatio="none" aria-hidden="true">
                  <path fill={color} d={lanePaths[k]} />
                </svg>
              )}
              {lane.segments
                .filter((s) => !many || controls.has(s.index))
                .map((s) => (
                  <button
                    key={s.index}
                    type="button"
                    class={`speaker-turn${props.playing === s.index ? " playing" : ""}`}
                    data-testid={`speaker-lane-${lane.id}-segment-${s.index}`}
                    style={{ left: pct(s.start), width: pct(width(s)), background: color }}
                    title={t("speakerLanes.turnTitle", {
                      name: lane.name,
                      n: s.index + 1,
                      start: formatNumber(s.start, 1),
                      end: formatNumber(s.end, 1),
                    })}
                    aria-label={t("speakerLanes.turnLabel", { name: lane.name, n: s.index + 1 })}
                    onClick={() => props.onRegion(s.index)}
                  />
                ))}
            </div>
          </div>
        );
      })}
    </div>
  );
}

// A recording's waveform with its segments as regions: clicking a region plays that segment,
// and the playing one is highlighted (here and, through `playing`, in the view's text).
import { useEffect, useState } from "preact/hooks";
import { api, asUiError, jobId, type UiError, type Waveform as Peaks } from "./api";
import { formatNumber, t } from "./i18n";
import { ErrorNotice } from "./rejection";

/** Peaks fetched per waveform: about one per 2 px of a wide window. */
const BUCKETS = 600;
const HEIGHT = 64;

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

export function Waveform(props: {
  testid: string;
  project: string;
  file: string;
  /** Refetch when this changes (the file was written again). */
  version?: string | number;
  regions: Region[];
  playing: number | null;
  onRegion: (index: number) => void;
}) {
  const [peaks, setPeaks] = useState<Peaks | null>(null);
  const [error, setError] = useState<UiError | null>(null);
  // One Tab stop for the whole waveform; the arrow keys move between its segments.
  const [active, setActive] = useState(0);
  useEffect(() => {
    setError(null);
    api.waveform(props.project, props.file, BUCKETS).then(setPeaks, (e) => setError(asUiError(e)));
  }, [props.project, props.file, props.version]);
  if (error) return <ErrorNotice scope={props.testid} error={error} onDismiss={() => setError(null)} />;
  if (!peaks) return <div class="waveform loading" data-testid={`${props.testid}-loading`} />;
  const width = Math.max(peaks.peaks.length, 1);
  const duration = Math.max(peaks.duration_secs, 1e-6);
  const x = (t: number) => (t / duration) * width;
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
      (e.currentTarget as SVGElement).querySelector<SVGElement>(`[data-index='${to}']`)?.focus();
    } else if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      props.onRegion(at);
    }
  };
  return (
    <svg
      class="waveform"
      data-testid={props.testid}
      data-duration={peaks.duration_secs.toFixed(3)}
      viewBox={`0 0 ${width} ${HEIGHT}`}
      preserveAspectRatio="none"
      role="group"
      aria-label={t("waveform.label")}
      onKeyDown={onKeyDown}
    >
      {props.regions.map((r, i) => {
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
      {peaks.peaks.map((p, i) => {
        const h = Math.max(p * HEIGHT, 0.5);
        return <rect key={`p${i}`} class="peak" x={i} width={1} y={(HEIGHT - h) / 2} height={h} />;
      })}
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
export function SpeakerLanes(props: {
  testid: string;
  duration: number;
  lanes: SpeakerLane[];
  playing: number | null;
  onRegion: (index: number) => void;
}) {
  const duration = Math.max(props.duration, 1e-6);
  const pct = (t: number) => `${((t / duration) * 100).toFixed(3)}%`;
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
              {lane.segments.map((s) => (
                <button
                  key={s.index}
                  type="button"
                  class={`speaker-turn${props.playing === s.index ? " playing" : ""}`}
                  data-testid={`speaker-lane-${lane.id}-segment-${s.index}`}
                  style={{ left: pct(s.start), width: pct(Math.max(s.end - s.start, duration / 500)), background: color }}
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

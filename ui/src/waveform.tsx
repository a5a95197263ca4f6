// A recording's waveform with its segments as regions: clicking a region plays that segment,
// and the playing one is highlighted (here and, through `playing`, in the view's text).
import { useEffect, useState } from "preact/hooks";
import { api, asUiError, jobId, type UiError, type Waveform as Peaks } from "./api";
import { ErrorNotice } from "./rejection";

/** Peaks fetched per waveform: about one per 2 px of a wide window. */
const BUCKETS = 600;
const HEIGHT = 64;

export type Region = { start: number; end: number; state?: string };

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
  useEffect(() => {
    setError(null);
    api.waveform(props.project, props.file, BUCKETS).then(setPeaks, (e) => setError(asUiError(e)));
  }, [props.project, props.file, props.version]);
  if (error) return <ErrorNotice scope={props.testid} error={error} onDismiss={() => setError(null)} />;
  if (!peaks) return <div class="waveform loading" data-testid={`${props.testid}-loading`} />;
  const width = Math.max(peaks.peaks.length, 1);
  const duration = Math.max(peaks.duration_secs, 1e-6);
  const x = (t: number) => (t / duration) * width;
  return (
    <svg
      class="waveform"
      data-testid={props.testid}
      data-duration={peaks.duration_secs.toFixed(3)}
      viewBox={`0 0 ${width} ${HEIGHT}`}
      preserveAspectRatio="none"
      role="group"
      aria-label="Waveform; click a segment to play it"
    >
      {props.regions.map((r, i) => (
        <rect
          key={i}
          data-testid={`${props.testid}-region-${i}`}
          data-state={r.state ?? ""}
          class={`region${props.playing === i ? " playing" : ""}${r.state ? ` ${r.state}` : ""}`}
          x={x(r.start)}
          width={Math.max(x(r.end) - x(r.start), 1)}
          y={0}
          height={HEIGHT}
          onClick={() => props.onRegion(i)}
        >
          <title>
            Segment {i + 1}: {r.start.toFixed(1)}–{r.end.toFixed(1)} s
          </title>
        </rect>
      ))}
      {peaks.peaks.map((p, i) => {
        const h = Math.max(p * HEIGHT, 0.5);
        return <rect key={`p${i}`} class="peak" x={i} width={1} y={(HEIGHT - h) / 2} height={h} />;
      })}
    </svg>
  );
}

// Device memory over time, with baseline and peak marked; or the no-GPU state.
import { useState } from "preact/hooks";
import { useEvent } from "../hooks";
import { api, asUiError, type BenchmarkRun, type GpuStatus, type MemorySample, type UiError } from "../api";
import { formatMib, t } from "../i18n";
import { ErrorNotice } from "../rejection";

const MIB = 1024 * 1024;

export interface GpuPoint {
  at: number;
  usedMib: number;
  totalMib: number;
}

export function toPoint(s: MemorySample): GpuPoint {
  return { at: s.at_ms, usedMib: Math.round(s.used_bytes / MIB), totalMib: Math.round(s.total_bytes / MIB) };
}

export function GpuPanel(props: { status: GpuStatus | null; points: GpuPoint[] }) {
  const { status, points } = props;
  return (
    <section class="panel" data-testid="gpu-panel" aria-labelledby="gpu-heading">
      <h2 id="gpu-heading">{t("gpu.heading")}</h2>
      {status === null && <p class="muted">{t("common.checking")}</p>}
      {status?.state === "no_gpu" && (
        <div class="gpu-none" data-testid="gpu-state" data-state="no_gpu">
          <b>{t("gpu.none")}</b>
          <div class="muted" data-testid="gpu-reason">
            {t("gpu.noneDetail", { reason: status.reason })}
          </div>
        </div>
      )}
      {status?.state === "sampling" && <GpuChart name={status.device} points={points} />}
      {status?.state === "sampling" && status.last_error && <div class="error-text">{status.last_error}</div>}
      <Benchmark />
    </section>
  );
}

function GpuChart(props: { name: string; points: GpuPoint[] }) {
  const { points } = props;
  if (points.length === 0) return <p data-testid="gpu-state" data-state="sampling">{props.name}</p>;
  const total = points[points.length - 1].totalMib;
  const baseline = points[0].usedMib;
  const peak = Math.max(...points.map((p) => p.usedMib));
  const current = points[points.length - 1].usedMib;
  const w = 280;
  const h = 110;
  const t0 = points[0].at;
  const span = Math.max(1, points[points.length - 1].at - t0);
  const y = (mib: number) => h - (h * mib) / Math.max(1, total);
  const line = points.map((p) => `${((p.at - t0) / span) * w},${y(p.usedMib)}`).join(" ");
  return (
    <div data-testid="gpu-state" data-state="sampling">
      <div class="muted">{props.name}</div>
      <svg data-testid="gpu-chart" viewBox={`0 0 ${w} ${h}`} width="100%" role="img" aria-label={t("gpu.chartLabel")}>
        <rect x="0" y="0" width={w} height={h} class="chart-bg" />
        <line x1="0" x2={w} y1={y(baseline)} y2={y(baseline)} class="chart-baseline" />
        <line x1="0" x2={w} y1={y(peak)} y2={y(peak)} class="chart-peak" />
        <polyline points={line} class="chart-line" />
      </svg>
      <div class="gpu-figures">
        <span data-testid="gpu-current">{t("gpu.now", { value: formatMib(current) })}</span>
        <span data-testid="gpu-baseline">{t("gpu.baseline", { value: formatMib(baseline) })}</span>
        <span data-testid="gpu-peak">{t("gpu.peak", { value: formatMib(peak) })}</span>
        <span data-testid="gpu-delta">{t("gpu.delta", { value: formatMib(peak - baseline) })}</span>
        <span>{t("gpu.total", { value: formatMib(total) })}</span>
      </div>
    </div>
  );
}

/** Runs the serving harness against the app's server and opens its report. */
function Benchmark() {
  const [running, setRunning] = useState(false);
  const [line, setLine] = useState("");
  const [run, setRun] = useState<BenchmarkRun | null>(null);
  const [error, setError] = useState<UiError | null>(null);
  useEvent("bench", (p) => setLine(p.line));
  const start = async () => {
    setRunning(true);
    setError(null);
    setRun(null);
    try {
      setRun(await api.runBenchmark());
    } catch (e) {
      setError(asUiError(e));
    } finally {
      setRunning(false);
    }
  };
  return (
    <div class="bench">
      <h3>{t("bench.heading")}</h3>
      <p class="muted">{t("bench.about")}</p>
      <button data-testid="bench-run" disabled={running} onClick={start}>
        {running ? t("common.running") : t("bench.run")}
      </button>
      {running && (
        <div class="muted" data-testid="bench-progress" aria-live="polite">
          {line}
        </div>
      )}
      {run && (
        <div data-testid="bench-result">
          <pre class="bench-summary" tabIndex={0} aria-label={t("bench.heading")}>
            {run.summary}
          </pre>
          <button data-testid="bench-open-report" onClick={() => api.openReport(run.html).catch((e) => setError(asUiError(e)))}>
            {t("bench.openReport")}
          </button>
        </div>
      )}
      {error && <ErrorNotice scope="bench" error={error} onDismiss={() => setError(null)} />}
    </div>
  );
}

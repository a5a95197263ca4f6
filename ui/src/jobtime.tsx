// A running job's time: elapsed, and about how long is left once the job has shown its pace
// (the estimate is the core's, `headroom_base::job_clock`, carried by `job-progress`).
import type { JobTime } from "./api";
import { formatStopwatch, t } from "./i18n";

/** "1:02 elapsed · about 1:45 left"; nothing before the first report. */
export function jobTimeText(time: JobTime | null | undefined): string {
  if (!time) return "";
  const elapsed = t("job.elapsed", { elapsed: formatStopwatch(time.elapsed_secs) });
  const left = time.remaining_secs;
  return left === null || left <= 0 ? elapsed : `${elapsed} · ${t("job.left", { left: formatStopwatch(left) })}`;
}

export function JobTimeText(props: { time: JobTime | null | undefined; testid: string }) {
  const text = jobTimeText(props.time);
  return text ? (
    <span class="muted job-time" data-testid={props.testid}>
      {text}
    </span>
  ) : null;
}

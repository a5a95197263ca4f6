// Interrupted jobs: work a crash, a kill or a closed window stopped, found in the projects at
// start, each with Resume (from its checkpoint) and Discard.
import { useCallback, useEffect, useState } from "preact/hooks";
import { api, asUiError, jobId, type JobInfo, type JobTime, type UiError } from "../api";
import { announce, focusWhenLost } from "../a11y";
import { useEvent, useJobsChanged } from "../hooks";
import { codeLabel, t } from "../i18n";
import { JobTimeText } from "../jobtime";
import { ErrorNotice } from "../rejection";

export function InterruptedJobs(props: { onResumed: (project: string) => void }) {
  const [jobs, setJobs] = useState<JobInfo[]>([]);
  // Recorded job id -> the handle of its resume while it runs.
  const [resuming, setResuming] = useState<Record<string, string>>({});
  const [progress, setProgress] = useState<Record<string, { fraction: number; time: JobTime | null }>>({});
  const [error, setError] = useState<UiError | null>(null);

  const refresh = useCallback(() => api.interruptedJobs().then(setJobs, (e) => setError(asUiError(e))), []);
  useEffect(() => {
    refresh();
  }, []);
  // A job paused in a view is listed at once.
  useJobsChanged(refresh);

  useEvent("job-progress", (p) => {
    if (Object.values(resuming).includes(p.job))
      setProgress((all) => ({ ...all, [p.job]: { fraction: p.progress, time: p.time } }));
  });

  const resume = async (job: JobInfo) => {
    const handle = jobId("resume");
    setError(null);
    setResuming((r) => ({ ...r, [job.id]: handle }));
    // Resume and Discard give way to Cancel while it runs; when the job is done and its row
    // gone, the focus goes to the view's heading.
    focusWhenLost(`job-cancel-${job.id}`);
    try {
      await api.resumeJob(job.project, job.id, handle);
      props.onResumed(job.project);
      announce(t("announce.resumed", { kind: codeLabel("job.kind", job.kind) }));
    } catch (e) {
      setError(asUiError(e));
    } finally {
      setResuming(({ [job.id]: _, ...rest }) => rest);
      await refresh();
      focusWhenLost("view-title");
    }
  };

  const discard = async (job: JobInfo) => {
    setError(null);
    try {
      await api.discardJob(job.project, job.id);
    } catch (e) {
      setError(asUiError(e));
    }
    await refresh();
    focusWhenLost("view-title");
  };

  if (jobs.length === 0 && !error) return null;
  return (
    <section class="card interrupted-jobs" data-testid="interrupted-jobs" aria-label={t("jobs.heading")}>
      <h2>{t("jobs.heading")}</h2>
      <p class="muted">{t("jobs.about")}</p>
      {error && <ErrorNotice scope="jobs" error={error} onDismiss={() => setError(null)} />}
      <ul>
        {jobs.map((job) => {
          const handle = resuming[job.id];
          return (
            <li key={job.id} data-testid={`job-${job.id}`} data-kind={job.kind}>
              <span class="job-project">{job.project_name}</span>{" "}
              <span class="job-kind muted" data-kind={job.kind}>
                {codeLabel("job.kind", job.kind)}
              </span>{" "}
              {job.paused && (
                <>
                  <span class="badge" data-testid={`job-paused-${job.id}`}>
                    {t("jobs.paused")}
                  </span>{" "}
                </>
              )}
              <span data-testid={`job-description-${job.id}`}>{job.description}</span>{" "}
              {handle ? (
                <>
                  <progress
                    data-testid={`job-progress-${job.id}`}
                    max={1}
                    value={progress[handle]?.fraction ?? job.fraction}
                    aria-label={t("jobs.resumeProgress")}
                  />
                  <JobTimeText time={progress[handle]?.time} testid={`job-time-${job.id}`} />
                  <button data-testid={`job-cancel-${job.id}`} onClick={() => api.cancelJob(handle)}>
                    {t("common.cancel")}
                  </button>
                </>
              ) : (
                <>
                  <button data-testid={`job-resume-${job.id}`} onClick={() => resume(job)}>
                    {t("jobs.resume")}
                  </button>
                  <button data-testid={`job-discard-${job.id}`} onClick={() => discard(job)}>
                    {t("jobs.discard")}
                  </button>
                </>
              )}
            </li>
          );
        })}
      </ul>
    </section>
  );
}

// How a refusal looks where the user is working: what is busy, the limit, the position, a
// retry countdown and the choices that apply.
import { useEffect, useState } from "preact/hooks";
import type { RejectReason, Rejection, UiError } from "./api";

/** A title for every reason: the generated union makes a missing one a type error. */
const TITLES: Record<RejectReason, string> = {
  text_lane_full: "Text lane full",
  audio_lane_full: "Audio lane full",
  input_too_long: "Input too long",
  deadline_exceeded: "Deadline missed",
  upstream_unavailable: "Server down",
  upstream_busy: "Server overloaded",
  upstream_error: "Server refused the request",
  unusable_reply: "Unusable model reply",
  audio_priority: "Paused for audio work",
  gpu_memory_pressure: "GPU memory pressure",
  remote_not_allowed: "Not allowed to leave this machine",
  cancelled: "Cancelled",
};

export function reasonTitle(reason: RejectReason): string {
  return TITLES[reason];
}

export function occupancyLine(r: Rejection): string {
  const lane = r.lane === "text" ? "Text lane" : "Audio lane";
  return `${lane}: ${r.in_flight} of ${r.limit} running, ${r.waiting} of ${r.wait_limit} waiting`;
}

/** Seconds left until `deadline` (ms since epoch), ticking. */
function useCountdown(deadline: number | null): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (deadline === null || deadline <= Date.now()) return;
    const timer = setInterval(() => setNow(Date.now()), 250);
    return () => clearInterval(timer);
  }, [deadline]);
  if (deadline === null) return 0;
  return Math.max(0, Math.ceil((deadline - now) / 1000));
}

export interface NoticeActions {
  onRetry?: () => void;
  onRuleBased?: () => void;
  onCheckServer?: () => void;
  onDismiss: () => void;
}

/** An error from a command; rejections get the full treatment, other errors a plain line. */
export function ErrorNotice(props: { scope: string; error: UiError } & NoticeActions) {
  const { scope, error } = props;
  const r = error.rejection;
  const retryAction = error.actions.find((a) => a.action === "retry_after");
  const [retryAt] = useState(() =>
    retryAction && retryAction.action === "retry_after" ? Date.now() + retryAction.after_ms : null,
  );
  const left = useCountdown(retryAt);
  const canQueue = r != null && r.wait_limit > 0 && r.waiting < r.wait_limit;
  const offersRules = error.actions.some((a) => a.action === "use_rule_based_cleanup");
  const offersServer = error.actions.some((a) => a.action === "check_server");
  return (
    <div
      class={`notice ${error.kind}`}
      role="alert"
      data-testid={`rejection-${scope}`}
      data-reason={r?.reason ?? error.kind}
    >
      <div class="notice-title" data-testid={`rejection-reason-${scope}`}>
        {r ? reasonTitle(r.reason) : error.kind === "cancelled" ? "Cancelled" : "Error"}
      </div>
      <div class="notice-message" data-testid={`rejection-message-${scope}`}>
        {error.message}
      </div>
      {r && (
        <ul class="notice-facts">
          <li data-testid={`rejection-busy-${scope}`}>{occupancyLine(r)}</li>
          {r.position !== null && <li data-testid={`rejection-position-${scope}`}>Queue position: {r.position}</li>}
          {r.detail && <li>{r.detail}</li>}
        </ul>
      )}
      <div class="notice-actions">
        {retryAction && props.onRetry && (
          <button data-testid={`rejection-retry-${scope}`} onClick={props.onRetry}>
            {left > 0 ? <span data-testid={`rejection-countdown-${scope}`}>Retry in {left} s</span> : "Retry now"}
          </button>
        )}
        {canQueue && props.onRetry && (
          <button data-testid={`rejection-queue-${scope}`} onClick={props.onRetry}>
            Queue it ({r!.wait_limit - r!.waiting} wait slot{r!.wait_limit - r!.waiting === 1 ? "" : "s"} free)
          </button>
        )}
        {offersRules && props.onRuleBased && (
          <button data-testid={`rejection-fallback-${scope}`} onClick={props.onRuleBased}>
            Use rule-based cleanup
          </button>
        )}
        {offersServer && props.onCheckServer && (
          <button data-testid={`rejection-settings-${scope}`} onClick={props.onCheckServer}>
            Check server settings
          </button>
        )}
        <button class="quiet" data-testid={`rejection-dismiss-${scope}`} onClick={props.onDismiss}>
          Dismiss
        </button>
      </div>
    </div>
  );
}

// How a refusal looks where the user is working: what is busy, the limit, the position, a
// retry countdown and the choices that apply.
import { focusWhenLost } from "./a11y";
import { useEffect, useState } from "preact/hooks";
import type { CrossedSignal, RejectReason, Rejection, TextNote, UiError, VoiceNote } from "./api";
import {
  codeLabel,
  formatList,
  formatMib,
  formatNumber,
  formatPercent,
  formatSeconds,
  has,
  languageName,
  t,
  type MessageKey,
} from "./i18n";

/** The catalog key of every reason: the generated union makes a missing one a type error. */
const TITLES: Record<RejectReason, MessageKey> = {
  text_lane_full: "reason.text_lane_full",
  audio_lane_full: "reason.audio_lane_full",
  input_too_long: "reason.input_too_long",
  deadline_exceeded: "reason.deadline_exceeded",
  upstream_unavailable: "reason.upstream_unavailable",
  upstream_busy: "reason.upstream_busy",
  upstream_error: "reason.upstream_error",
  unusable_reply: "reason.unusable_reply",
  audio_priority: "reason.audio_priority",
  gpu_memory_pressure: "reason.gpu_memory_pressure",
  remote_not_allowed: "reason.remote_not_allowed",
  cancelled: "reason.cancelled",
};

/** A reason's title in the user's language. */
export function reasonTitle(reason: RejectReason): string {
  return t(TITLES[reason]);
}

/** A reason code as the core sends it in free-form places (`text_lane_full`, …, `failed`). */
export function reasonLabel(code: string): string {
  return codeLabel("reason", code);
}

/** A note on a text (why the rules cleaned it, why it is not translated), in the window's
 * language from its code; the English line from older files otherwise. */
export function textNote(code: TextNote | null | undefined, english: string | null | undefined): string | null {
  if (!code) return english ?? null;
  switch (code.kind) {
    case "rule_based":
      return t("note.ruleBased", { reasons: formatList(code.reasons.map(reasonTitle)) });
    case "not_translated":
      return t("note.notTranslated", { reasons: formatList(code.reasons.map(reasonTitle)) });
    case "rules_instead_of_rewrite":
      return t("note.rulesInsteadOfRewrite");
    default:
      return english ?? null;
  }
}

/** A crossed signal's value as its unit reads (the summary says "per hour" where it is one). */
function signalValue(s: CrossedSignal): string {
  switch (s.unit) {
    case "percent": {
      const percent = s.value * 100;
      return formatPercent(s.value, Math.abs(percent - Math.round(percent)) < 0.05 ? 0 : 1);
    }
    case "factor":
      return formatNumber(s.value, 2);
    case "seconds":
      return formatSeconds(s.value, 2);
    case "count":
      return formatNumber(s.value, 0);
    case "bytes_per_hour":
      return formatMib(s.value / (1024 * 1024));
    case "hidden":
      return "";
  }
}

/** What a crossed signal says (what happened, what it means, what to do), in the window's
 * language from its code, value and labels; a signal this window does not know keeps the
 * core's English. */
export function signalMessage(s: CrossedSignal): string {
  const key = (part: string) => `signal.${s.code}.${part}`;
  const [summary, meaning, action] = ["summary", "meaning", "action"].map(key);
  if (!has(summary) || !has(meaning) || !has(action)) return s.message_en;
  const labels = s.labels;
  const summaryText = t(summary, {
    value: signalValue(s),
    count: s.value,
    window: t("unit.minutes", { value: formatNumber(s.window_mins, 0) }),
    duration: t("unit.minutes", { value: formatNumber(s.for_mins, 0) }),
    reason: labels.reason === undefined ? "" : reasonLabel(labels.reason),
    kind: labels.kind === undefined ? "" : codeLabel("signal.kind", labels.kind),
    project: labels.project ?? "",
    upstream: labels.upstream ?? "",
  });
  return t("signal.message", { summary: summaryText, meaning: t(meaning), action: t(action) });
}

/** Why a narration is spoken by another voice, in the window's language (as [`textNote`]). */
export function voiceNote(code: VoiceNote | null | undefined, english: string | null | undefined): string | null {
  if (!code) return english ?? null;
  switch (code.kind) {
    case "speaks_english_only":
      return t("note.speaksEnglishOnly", {
        voice: code.voice,
        language: languageName(code.language, code.language),
        instead: code.instead,
      });
    default:
      return english ?? null;
  }
}

export function occupancyLine(r: Rejection): string {
  return t("rejection.occupancy", {
    lane: t(r.lane === "text" ? "lane.text" : "lane.audio"),
    inFlight: r.in_flight,
    limit: r.limit,
    waiting: r.waiting,
    waitLimit: r.wait_limit,
  });
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
      tabIndex={-1}
      data-testid={`rejection-${scope}`}
      data-reason={r?.reason ?? error.kind}
    >
      <div class="notice-title" data-testid={`rejection-reason-${scope}`}>
        {r ? reasonTitle(r.reason) : t(error.kind === "cancelled" ? "error.cancelled" : "error.generic")}
      </div>
      <div class="notice-message" data-testid={`rejection-message-${scope}`}>
        {error.message}
      </div>
      {r && (
        <ul class="notice-facts">
          <li data-testid={`rejection-busy-${scope}`}>{occupancyLine(r)}</li>
          {r.position !== null && <li data-testid={`rejection-position-${scope}`}>{t("rejection.position", { position: r.position })}</li>}
          {r.detail && <li>{r.detail}</li>}
        </ul>
      )}
      <div class="notice-actions">
        {retryAction && props.onRetry && (
          <button data-testid={`rejection-retry-${scope}`} onClick={props.onRetry}>
            {left > 0 ? (
              <span data-testid={`rejection-countdown-${scope}`}>{t("rejection.retryIn", { seconds: left })}</span>
            ) : (
              t("rejection.retryNow")
            )}
          </button>
        )}
        {canQueue && props.onRetry && (
          <button data-testid={`rejection-queue-${scope}`} onClick={props.onRetry}>
            {t("rejection.queue", { free: r!.wait_limit - r!.waiting })}
          </button>
        )}
        {offersRules && props.onRuleBased && (
          <button data-testid={`rejection-fallback-${scope}`} onClick={props.onRuleBased}>
            {t("rejection.ruleBased")}
          </button>
        )}
        {offersServer && props.onCheckServer && (
          <button data-testid={`rejection-settings-${scope}`} onClick={props.onCheckServer}>
            {t("rejection.checkServer")}
          </button>
        )}
        <button class="quiet" data-testid={`rejection-dismiss-${scope}`}
          onClick={() => {
            props.onDismiss();
            // The notice (and the focus on Dismiss) is gone: back to the view's heading.
            focusWhenLost("view-title");
          }}
        >
          {t("common.dismiss")}
        </button>
      </div>
    </div>
  );
}

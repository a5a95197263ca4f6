// Live lane occupancy and the rejection history.
import type { CpuShareView, CrossedSignal, LaneView, RejectionRecord, UpstreamView } from "../api";
import { codeLabel, formatClock, formatList, formatMs, formatSeconds, t, tr } from "../i18n";
import { occupancyLine, reasonTitle, signalMessage } from "../rejection";

function laneKey(l: LaneView): string {
  return l.lane === "audio" ? "audio" : `text-${l.server_url ?? "default"}`;
}

export function LanesPanel(props: { lanes: LaneView[] }) {
  const history: RejectionRecord[] = props.lanes
    .flatMap((l) => l.recent_rejections)
    .sort((a, b) => b.at_unix_ms - a.at_unix_ms)
    .slice(0, 20);
  const textLanes = props.lanes.filter((l) => l.lane === "text");
  return (
    <section class="panel" data-testid="lanes-panel" aria-labelledby="lanes-heading">
      <h2 id="lanes-heading">{t("lanes.heading")}</h2>
      {props.lanes.map((l) => {
        // The first text lane (the app's default server) gets the plain test ids.
        const id = l.lane === "audio" ? "audio" : textLanes.indexOf(l) === 0 ? "text" : laneKey(l);
        const rejected = Object.values(l.rejected_total).reduce((a: number, b) => a + (b ?? 0), 0);
        return (
          <div class={`lane lane-${l.lane}`} key={laneKey(l)} data-testid={`lane-${id}`}>
            <div class="lane-title">
              {t(l.lane === "audio" ? "lane.audio" : "lane.text")}
              {l.server_url && <span class="lane-url"> {l.server_url}</span>}
            </div>
            <div class="lane-counts">
              <span>
                {tr("lanes.inFlight", {
                  count: <b data-testid={`lane-${id}-in-flight`}>{l.occupancy.in_flight}</b>,
                  limit: <span data-testid={`lane-${id}-limit`}>{l.occupancy.limit}</span>,
                })}
                {l.occupancy.reserved > 0 && (
                  <span class="muted" data-testid={`lane-${id}-reserved`} title={t("lanes.reservedTitle")}>
                    {" "}
                    {t("lanes.reserved", { count: l.occupancy.reserved })}
                  </span>
                )}
              </span>
              <span>
                {tr("lanes.waiting", {
                  count: <b data-testid={`lane-${id}-waiting`}>{l.occupancy.waiting}</b>,
                  limit: <span data-testid={`lane-${id}-wait-limit`}>{l.occupancy.wait_limit}</span>,
                })}
              </span>
            </div>
            <div class="lane-meter" aria-hidden="true">
              <div
                style={{
                  width: `${(100 * l.occupancy.in_flight) / Math.max(1, l.occupancy.limit + l.occupancy.reserved)}%`,
                }}
              />
            </div>
            <div class="lane-totals">
              {tr("lanes.totals", {
                admitted: l.admitted_total,
                rejected: <span data-testid={`lane-${id}-rejected`}>{rejected}</span>,
              })}
              {l.median_latency_ms !== null && (
                <>
                  {" · "}
                  {t("lanes.median", { latency: formatMs(l.median_latency_ms) })}
                </>
              )}
            </div>
            {l.cpu && <CpuShare cpu={l.cpu} />}
            {l.lane === "text" && l.upstreams.length > 1 && <Upstreams id={id} upstreams={l.upstreams} />}
            {l.signals.length > 0 && <Signals signals={l.signals} />}
          </div>
        );
      })}
      <h3>{t("lanes.rejections")}</h3>
      {history.length === 0 ? (
        <p class="muted" data-testid="rejection-history-empty">
          {t("lanes.noRejections")}
        </p>
      ) : (
        <ol class="history" data-testid="rejection-history" tabIndex={0} aria-label={t("lanes.rejections")}>
          {history.map((h, i) => (
            <li key={`${h.at_unix_ms}-${i}`} data-testid="rejection-history-item" data-reason={h.rejection.reason}>
              <time dateTime={new Date(h.at_unix_ms).toISOString()}>{formatClock(h.at_unix_ms)}</time> <b>{reasonTitle(h.rejection.reason)}</b>
              <div class="muted">{occupancyLine(h.rejection)}</div>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

// Who has the CPU: batch work running or paused for the person's work, how long it has given
// way, and the person's last job that ran beside batch work (and may have been slowed by it).
function CpuShare(props: { cpu: CpuShareView }) {
  const { cpu } = props;
  const latest = cpu.recent_beside[0];
  const paused = cpu.paused_total.filter((p) => p.paused_secs >= 0.05);
  return (
    <div class="lane-cpu" data-testid="cpu-share">
      {!cpu.batch_gives_way && (
        <div class="warning" data-testid="cpu-share-off">
          {t("cpu.off")}
        </div>
      )}
      {cpu.batch.map((b) => (
        <div key={b.work} data-testid={`cpu-batch-${b.work.replace(/ /g, "-")}`} data-state={b.paused > 0 ? "paused" : "running"}>
          {t("cpu.batch", {
            work: codeLabel("work", b.work),
            state: b.paused > 0 ? "paused" : cpu.batch_gives_way ? "givesWay" : "running",
          })}
        </div>
      ))}
      {paused.length > 0 && (
        <div class="muted" data-testid="cpu-paused-total">
          {t("cpu.pausedTotal", {
            list: formatList(paused.map((p) => `${codeLabel("work", p.work)} ${formatSeconds(p.paused_secs)}`)),
          })}
        </div>
      )}
      {latest && (
        <div class="muted" data-testid="cpu-beside-latest">
          {t("cpu.beside", {
            job: codeLabel("work", latest.job),
            took: formatMs(latest.took_ms),
            beside: formatList(latest.beside.map((w) => codeLabel("work", w))),
            gaveWay: cpu.batch_gives_way ? "yes" : "no",
          })}
        </div>
      )}
    </div>
  );
}

// Each upstream of a text lane that spans several: its share of the slots and its health.
function Upstreams(props: { id: string; upstreams: UpstreamView[] }) {
  return (
    <ul class="lane-upstreams" data-testid={`lane-${props.id}-upstreams`} aria-label={t("upstream.label")}>
      {props.upstreams.map((u, i) => (
        <li key={u.name} data-testid="lane-upstream" data-up={u.up ? "true" : "false"}>
          <span class="lane-url">{u.name}</span>{" "}
          {u.up ? (
            <span data-testid={`lane-upstream-${i}-state`}>{t("upstream.up")}</span>
          ) : (
            <b class="warning" data-testid={`lane-upstream-${i}-state`}>
              {u.down_reason ? t("upstream.downBecause", { reason: u.down_reason }) : t("upstream.down")}
              {u.retry_in_ms !== null && (
                <>
                  {" "}
                  {t("upstream.retry", { seconds: formatSeconds(Math.ceil(u.retry_in_ms / 1000), 0) })}
                </>
              )}
            </b>
          )}{" "}
          · <span data-testid={`lane-upstream-${i}-in-flight`}>{u.in_flight}</span> / {u.capacity}
          {u.recent_ttft_ms !== null && (
            <span class="muted">
              {" · "}
              {t("upstream.ttft", { latency: formatMs(u.recent_ttft_ms) })}
            </span>
          )}
        </li>
      ))}
    </ul>
  );
}

// The rates that say a policy is wrong, in words, with what to do.
function Signals(props: { signals: CrossedSignal[] }) {
  return (
    <ul class="lane-signals" data-testid="lane-signals" role="status">
      {props.signals.map((s) => (
        <li
          key={`${s.code}-${Object.values(s.labels).join("-")}`}
          class={s.severity === "critical" ? "warning" : undefined}
          data-testid="lane-signal"
          data-code={s.code}
        >
          <b data-testid="lane-signal-title" title={codeLabel("signal.severity", s.severity)}>
            {codeLabel("signal", s.code)}
          </b>
          {": "}
          {signalMessage(s)}
        </li>
      ))}
    </ul>
  );
}

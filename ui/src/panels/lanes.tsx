// Live lane occupancy and the rejection history.
import type { CpuShareView, CrossedSignal, LaneView, RejectionRecord, UpstreamView } from "../api";
import { occupancyLine, reasonTitle } from "../rejection";

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
      <h2 id="lanes-heading">Lanes</h2>
      {props.lanes.map((l) => {
        // The first text lane (the app's default server) gets the plain test ids.
        const id = l.lane === "audio" ? "audio" : textLanes.indexOf(l) === 0 ? "text" : laneKey(l);
        const rejected = Object.values(l.rejected_total).reduce((a: number, b) => a + (b ?? 0), 0);
        return (
          <div class={`lane lane-${l.lane}`} key={laneKey(l)} data-testid={`lane-${id}`}>
            <div class="lane-title">
              {l.lane === "audio" ? "Audio lane" : "Text lane"}
              {l.server_url && <span class="lane-url"> {l.server_url}</span>}
            </div>
            <div class="lane-counts">
              <span>
                In flight <b data-testid={`lane-${id}-in-flight`}>{l.occupancy.in_flight}</b> /{" "}
                <span data-testid={`lane-${id}-limit`}>{l.occupancy.limit}</span>
                {l.occupancy.reserved > 0 && (
                  <span class="muted" data-testid={`lane-${id}-reserved`} title="Kept for interactive work">
                    {" "}
                    +{l.occupancy.reserved} interactive
                  </span>
                )}
              </span>
              <span>
                Waiting <b data-testid={`lane-${id}-waiting`}>{l.occupancy.waiting}</b> /{" "}
                <span data-testid={`lane-${id}-wait-limit`}>{l.occupancy.wait_limit}</span>
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
              admitted {l.admitted_total} · rejected <span data-testid={`lane-${id}-rejected`}>{rejected}</span>
              {l.median_latency_ms !== null && <> · median {l.median_latency_ms} ms</>}
            </div>
            {l.cpu && <CpuShare cpu={l.cpu} />}
            {l.lane === "text" && l.upstreams.length > 1 && <Upstreams id={id} upstreams={l.upstreams} />}
            {l.signals.length > 0 && <Signals signals={l.signals} />}
          </div>
        );
      })}
      <h3>Rejections</h3>
      {history.length === 0 ? (
        <p class="muted" data-testid="rejection-history-empty">
          None yet.
        </p>
      ) : (
        <ol class="history" data-testid="rejection-history">
          {history.map((h, i) => (
            <li key={`${h.at_unix_ms}-${i}`} data-testid="rejection-history-item" data-reason={h.rejection.reason}>
              <time>{new Date(h.at_unix_ms).toLocaleTimeString()}</time> <b>{reasonTitle(h.rejection.reason)}</b>
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
          Batch work competes with yours for the CPU (audio_lane.batch_gives_way is off).
        </div>
      )}
      {cpu.batch.map((b) => (
        <div key={b.work} data-testid={`cpu-batch-${b.work.replace(/ /g, "-")}`} data-state={b.paused > 0 ? "paused" : "running"}>
          Batch {b.work}: {b.paused > 0 ? "paused for your work" : cpu.batch_gives_way ? "running, gives way to yours" : "running"}
        </div>
      ))}
      {paused.length > 0 && (
        <div class="muted" data-testid="cpu-paused-total">
          Paused for your work so far: {paused.map((p) => `${p.work} ${p.paused_secs.toFixed(1)} s`).join(", ")}
        </div>
      )}
      {latest && (
        <div class="muted" data-testid="cpu-beside-latest">
          Your last {latest.job} ({latest.took_ms} ms) ran beside batch {latest.beside.join(", ")}
          {cpu.batch_gives_way ? ", which gave way" : ", which may have slowed it"}.
        </div>
      )}
    </div>
  );
}

// Each upstream of a text lane that spans several: its share of the slots and its health.
function Upstreams(props: { id: string; upstreams: UpstreamView[] }) {
  return (
    <ul class="lane-upstreams" data-testid={`lane-${props.id}-upstreams`} aria-label="Upstreams">
      {props.upstreams.map((u, i) => (
        <li key={u.name} data-testid="lane-upstream" data-up={u.up ? "true" : "false"}>
          <span class="lane-url">{u.name}</span>{" "}
          {u.up ? (
            <span data-testid={`lane-upstream-${i}-state`}>up</span>
          ) : (
            <b class="warning" data-testid={`lane-upstream-${i}-state`}>
              down{u.down_reason ? `: ${u.down_reason}` : ""}
              {u.retry_in_ms !== null && ` (tried again in ${Math.ceil(u.retry_in_ms / 1000)} s)`}
            </b>
          )}{" "}
          · <span data-testid={`lane-upstream-${i}-in-flight`}>{u.in_flight}</span> / {u.capacity}
          {u.recent_ttft_ms !== null && <span class="muted"> · first words in {u.recent_ttft_ms} ms</span>}
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
          {s.message_en}
        </li>
      ))}
    </ul>
  );
}

//! The fleet report as a readable table.

use super::{BackendInfo, FleetReport, KillReport, Load};
use std::collections::BTreeMap;
use std::fmt::Write;

fn reasons(map: &BTreeMap<String, usize>) -> String {
    if map.is_empty() {
        return "none".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn opt_ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1} ms"))
        .unwrap_or_else(|| "-".into())
}

/// What the upstreams were, in one line.
pub fn describe_backend(backend: &BackendInfo) -> String {
    match backend {
        BackendInfo::Simulated { server } => format!(
            "simulated upstreams (in-process; {} slots each, {:.0} tokens/s per slot, first token after {} ms: the CPU does not limit them)",
            server.slots, server.tokens_per_s, server.first_token_ms
        ),
        BackendInfo::LlamaServer { config } => format!(
            "llama-server {} with {} (-c {} -np {} -t {}), started by the bench on loopback",
            config.binary.display(),
            config
                .gguf
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            config.context,
            config.slots,
            config.threads
        ),
        BackendInfo::External { urls } => format!("the servers at {}", urls.join(", ")),
    }
}

fn kill_text(out: &mut String, k: &KillReport) {
    let _ = writeln!(
        out,
        "== kill: {} upstreams at {:.2} requests/s, {} killed after {:.0} s ==",
        k.upstreams, k.rate_per_s, k.killed, k.killed_after_s
    );
    let _ = writeln!(
        out,
        "  marked down after   {} (slots {} -> {})",
        opt_ms(k.marked_down_after_ms),
        k.capacity_before,
        k.capacity_after
    );
    let _ = writeln!(
        out,
        "  sent to it after    {} before it was marked down, {} breaker probe(s) later{}; answered by it: {}",
        k.attempts_before_marked_down,
        k.breaker_probes,
        if k.attempts_after_kill_ms.is_empty() {
            String::new()
        } else {
            format!(
                " (at {} ms)",
                k.attempts_after_kill_ms
                    .iter()
                    .map(|t| format!("{t:.0}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        k.answered_by_it_after_kill
    );
    let _ = writeln!(
        out,
        "  streams on it       {}; failed by the kill: {} ({})",
        k.streams_on_it,
        k.failed_by_kill,
        reasons(&k.failures_by_reason)
    );
    let _ = writeln!(
        out,
        "  first served after  first token {}, completed {} after the kill (elsewhere)",
        opt_ms(k.first_token_elsewhere_after_ms),
        opt_ms(k.first_completion_elsewhere_after_ms)
    );
    let _ = writeln!(
        out,
        "  refused             before the kill {:.1}% ({} of {} in {:.0} s), after {:.1}% ({} of {} in {:.0} s: {}); {:.1} more than before",
        k.before.rejection_rate * 100.0,
        k.before.refused,
        k.before.offered,
        k.before.seconds,
        k.after.rejection_rate * 100.0,
        k.after.refused,
        k.after.offered,
        k.after.seconds,
        reasons(&k.after.refused_by_reason),
        k.excess_refused
    );
}

/// A readable summary for the terminal.
pub fn render_text(r: &FleetReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", describe_backend(&r.backend));
    let load = match r.load {
        Load::TargetRejection(t) => format!("arrival rate set for {:.0}% refused", t * 100.0),
        Load::RatePerUpstream(x) => format!("{x:.2} requests/s per upstream"),
    };
    let _ = writeln!(
        out,
        "lane: {} per upstream, {} waiting; {} arrivals, {load}; {:.0} s measured after {:.0} s; max_tokens {}",
        r.max_in_flight_per_upstream, r.max_waiting, r.arrivals, r.seconds, r.warmup_seconds, r.max_tokens
    );
    let _ = writeln!(
        out,
        "{:>9} {:>5} {:>9} {:>8} {:>9} {:>11} {:>9} {:>10} {:>10}  answered per upstream",
        "upstreams",
        "slots",
        "offered/s",
        "refused",
        "failed",
        "completed/s",
        "tokens/s",
        "TTFT p50",
        "TTFT p99"
    );
    for row in &r.rows {
        let (p50, p99) = row
            .ttft
            .as_ref()
            .map(|t| (format!("{:.1} ms", t.p50_ms), format!("{:.1} ms", t.p99_ms)))
            .unwrap_or_else(|| ("-".into(), "-".into()));
        let _ = writeln!(
            out,
            "{:>9} {:>5} {:>9.2} {:>7.1}% {:>9} {:>11.2} {:>9.1} {:>10} {:>10}  {}",
            row.upstreams,
            row.capacity,
            row.offered_per_s,
            row.rejection_rate * 100.0,
            row.failed,
            row.completed_per_s,
            row.output_tokens_per_s,
            p50,
            p99,
            row.answered_per_upstream
                .values()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join("/")
        );
    }
    for k in &r.kills {
        kill_text(&mut out, k);
    }
    out
}

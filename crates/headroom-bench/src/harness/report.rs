//! The harness report as text for a terminal and as one self-contained HTML file (inline CSS
//! and SVG charts: memory timeline with baseline and peak, latency CDF; nothing fetched).

use super::{HarnessReport, MemoryFigures, PassReport};
use crate::boundary::LatencySummary;
use std::fmt::Write;

fn ms(s: &Option<LatencySummary>) -> String {
    match s {
        Some(s) => format!(
            "n={:<3} mean {:>8.1}  std {:>7.1}  p50 {:>8.1}  p95 {:>8.1}  p99 {:>8.1}  max {:>8.1} ms",
            s.count, s.mean_ms, s.std_ms, s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms
        ),
        None => "no samples".into(),
    }
}

fn memory_line(m: &MemoryFigures) -> String {
    match m {
        MemoryFigures::Measured { source, window } => format!(
            "{source}: baseline {:.0} MiB, peak {:.0} MiB, delta {:.0} MiB ({} samples over {:.1} s)",
            window.baseline_mib,
            window.peak_mib,
            window.delta_mib,
            window.samples,
            window.duration_ms as f64 / 1000.0
        ),
        MemoryFigures::Absent { reason } => format!("absent ({reason})"),
    }
}

fn pass_text(out: &mut String, p: &PassReport) {
    let _ = writeln!(out, "== {} ==", p.label);
    for r in &p.requests {
        let _ = writeln!(
            out,
            "  batch {} {:<22} ttft {:>8}  latency {:>8.1} ms  tokens {:>4}",
            r.batch,
            r.outcome,
            r.ttft_ms
                .map(|t| format!("{t:.1} ms"))
                .unwrap_or_else(|| "-".into()),
            r.latency_ms,
            r.completion_tokens
                .map(|t| t.to_string())
                .unwrap_or_else(|| "-".into())
        );
    }
    let _ = writeln!(out, "  TTFT     {}", ms(&p.ttft));
    let _ = writeln!(out, "  latency  {}", ms(&p.latency));
    let _ = writeln!(out, "  TPOT     {}", ms(&p.tpot));
    let _ = writeln!(out, "  ITL      {}", ms(&p.itl));
    let _ = writeln!(
        out,
        "  throughput {:.2} req/s, {:.1} output tokens/s; {} ok; failures {}",
        p.requests_per_s,
        p.output_tokens_per_s,
        p.succeeded,
        if p.failures.is_empty() {
            "none".to_string()
        } else {
            p.failures
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let _ = writeln!(out, "  memory   {}", memory_line(&p.memory));
}

/// A readable summary for the terminal.
pub fn render_text(r: &HarnessReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "target {} model {} ({}); {} batches × {} concurrent, max_tokens {}, temperature 0, {} warm-up batch(es) excluded",
        r.target,
        r.model.as_deref().unwrap_or("?"),
        if r.loopback { "loopback" } else { "remote: synthetic prompts only" },
        r.batches,
        r.concurrency,
        r.max_tokens,
        r.warmup_batches
    );
    pass_text(&mut out, &r.text_only);
    if let Some(p) = &r.with_audio {
        pass_text(&mut out, p);
    }
    if let Some(a) = &r.audio {
        let _ = writeln!(out, "== audio job ({:.1} s clip) ==", a.clip_seconds);
        let _ = writeln!(out, "  idle             {}", ms(&a.idle));
        let _ = writeln!(out, "  under text load  {}", ms(&a.under_text_load));
        if let Some(ratio) = a.p50_ratio {
            let _ = writeln!(out, "  p50 ratio under load / idle: {ratio:.2}×");
        }
    }
    if let Some(s) = &r.soak {
        let _ = writeln!(out, "== soak ({} runs) ==", s.runs.len());
        let _ = writeln!(out, "  {}", s.report.summary);
        for line in &s.report.reasoning {
            let _ = writeln!(out, "  - {line}");
        }
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const W: f64 = 640.0;
const H: f64 = 220.0;
const PAD: f64 = 40.0;

/// A line chart of memory over time with baseline and peak lines.
fn memory_svg(p: &PassReport, period_ms: u64) -> String {
    let MemoryFigures::Measured { window, source } = &p.memory else {
        return String::new();
    };
    if p.memory_timeline.is_empty() {
        return String::new();
    }
    let t_max = p
        .memory_timeline
        .last()
        .map(|(t, _)| *t)
        .unwrap_or(1)
        .max(1) as f64;
    let lo = p
        .memory_timeline
        .iter()
        .map(|(_, m)| *m)
        .fold(f64::INFINITY, f64::min)
        .min(window.baseline_mib);
    let hi = window.peak_mib.max(lo + 1.0);
    let span = (hi - lo) * 1.1;
    let x = |t: f64| PAD + (W - 2.0 * PAD) * t / t_max;
    let y = |m: f64| H - PAD - (H - 2.0 * PAD) * (m - lo) / span;
    let points: Vec<String> = p
        .memory_timeline
        .iter()
        .map(|(t, m)| format!("{:.1},{:.1}", x(*t as f64), y(*m)))
        .collect();
    format!(
        r##"<figure><svg viewBox="0 0 {W} {H}" role="img" aria-label="memory over time">
<rect x="0" y="0" width="{W}" height="{H}" fill="#f6f8fa"/>
<line x1="{PAD}" x2="{x2}" y1="{yb:.1}" y2="{yb:.1}" stroke="#1a7f37" stroke-dasharray="4 3"/>
<text x="{tx}" y="{ybt:.1}" font-size="11" fill="#1a7f37">baseline {base:.0} MiB</text>
<line x1="{PAD}" x2="{x2}" y1="{yp:.1}" y2="{yp:.1}" stroke="#cf222e" stroke-dasharray="4 3"/>
<text x="{tx}" y="{ypt:.1}" font-size="11" fill="#cf222e">peak {peak:.0} MiB</text>
<polyline fill="none" stroke="#1f6feb" stroke-width="1.5" points="{pts}"/>
<text x="{PAD}" y="{bottom}" font-size="11">0 s</text><text x="{x2}" y="{bottom}" font-size="11" text-anchor="end">{secs:.1} s</text>
</svg><figcaption>{label}: {src}, sampled every {period_ms} ms; delta {delta:.0} MiB</figcaption></figure>"##,
        x2 = W - PAD,
        yb = y(window.baseline_mib),
        ybt = y(window.baseline_mib) + 12.0,
        yp = y(window.peak_mib),
        ypt = y(window.peak_mib) - 4.0,
        tx = PAD + 4.0,
        base = window.baseline_mib,
        peak = window.peak_mib,
        delta = window.delta_mib,
        pts = points.join(" "),
        bottom = H - PAD + 16.0,
        secs = t_max / 1000.0,
        label = escape(&p.label),
        src = escape(source),
    )
}

/// Empirical CDFs of TTFT and latency of one pass.
fn cdf_svg(p: &PassReport) -> String {
    let ok: Vec<_> = p.requests.iter().filter(|r| r.outcome == "ok").collect();
    if ok.is_empty() {
        return String::new();
    }
    let mut ttft: Vec<f64> = ok.iter().filter_map(|r| r.ttft_ms).collect();
    let mut lat: Vec<f64> = ok.iter().map(|r| r.latency_ms).collect();
    ttft.sort_by(f64::total_cmp);
    lat.sort_by(f64::total_cmp);
    let max = lat.last().copied().unwrap_or(1.0).max(1.0);
    let x = |v: f64| PAD + (W - 2.0 * PAD) * v / max;
    let y = |q: f64| H - PAD - (H - 2.0 * PAD) * q;
    let steps = |values: &[f64]| -> String {
        let n = values.len() as f64;
        let mut pts = vec![format!("{:.1},{:.1}", x(0.0), y(0.0))];
        for (i, v) in values.iter().enumerate() {
            pts.push(format!("{:.1},{:.1}", x(*v), y(i as f64 / n)));
            pts.push(format!("{:.1},{:.1}", x(*v), y((i + 1) as f64 / n)));
        }
        pts.join(" ")
    };
    format!(
        r##"<figure><svg viewBox="0 0 {W} {H}" role="img" aria-label="latency CDF">
<rect x="0" y="0" width="{W}" height="{H}" fill="#f6f8fa"/>
<polyline fill="none" stroke="#8250df" stroke-width="1.5" points="{t}"/>
<polyline fill="none" stroke="#1f6feb" stroke-width="1.5" points="{l}"/>
<text x="{PAD}" y="{top}" font-size="11" fill="#8250df">TTFT</text><text x="{lx}" y="{top}" font-size="11" fill="#1f6feb">latency</text>
<text x="{PAD}" y="{bottom}" font-size="11">0 ms</text><text x="{x2}" y="{bottom}" font-size="11" text-anchor="end">{max:.0} ms</text>
<text x="8" y="{y1}" font-size="11">1.0</text><text x="8" y="{y0}" font-size="11">0</text>
</svg><figcaption>{label}: share of requests finished (y) by time (x)</figcaption></figure>"##,
        t = steps(&ttft),
        l = steps(&lat),
        top = PAD - 8.0,
        lx = PAD + 50.0,
        bottom = H - PAD + 16.0,
        x2 = W - PAD,
        y1 = y(1.0) + 4.0,
        y0 = y(0.0),
        label = escape(&p.label),
    )
}

fn summary_row(name: &str, s: &Option<LatencySummary>) -> String {
    match s {
        Some(s) => format!(
            "<tr><th>{name}</th><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td></tr>",
            s.count, s.mean_ms, s.std_ms, s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms
        ),
        None => format!("<tr><th>{name}</th><td colspan=\"7\">no samples</td></tr>"),
    }
}

fn pass_html(out: &mut String, p: &PassReport, period_ms: u64) {
    let _ = write!(
        out,
        "<section><h2>{}</h2><table><tr><th></th><th>n</th><th>mean</th><th>std</th><th>p50</th><th>p95</th><th>p99</th><th>max (ms)</th></tr>{}{}{}{}</table>",
        escape(&p.label),
        summary_row("TTFT", &p.ttft),
        summary_row("latency", &p.latency),
        summary_row("TPOT", &p.tpot),
        summary_row("ITL", &p.itl)
    );
    let failures = if p.failures.is_empty() {
        "none".to_string()
    } else {
        p.failures
            .iter()
            .map(|(k, v)| format!("{} × {v}", escape(k)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = write!(
        out,
        "<p>{:.2} requests/s, {:.1} output tokens/s, {} succeeded; failures and rejections: {failures}.</p><p>Memory: {}</p>{}{}</section>",
        p.requests_per_s,
        p.output_tokens_per_s,
        p.succeeded,
        escape(&memory_line(&p.memory)),
        memory_svg(p, period_ms),
        cdf_svg(p)
    );
}

/// The whole report as one HTML file.
pub fn render_html(r: &HarnessReport) -> String {
    let mut out = String::from(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Headroom benchmark</title>
<style>body{font:14px/1.45 system-ui,sans-serif;max-width:760px;margin:24px auto;color:#1c2330}
table{border-collapse:collapse}td,th{border-bottom:1px solid #d9dee5;padding:3px 8px;text-align:right}
th:first-child{text-align:left}figure{margin:12px 0}figcaption{font-size:12px;color:#5f6b7a}
pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:12px}</style></head><body>
<h1>Headroom benchmark</h1>"#,
    );
    let _ = write!(
        out,
        "<p>Target <code>{}</code>, model <code>{}</code> ({}). {} measured batches of {} concurrent streamed requests, max_tokens {}, temperature 0; {} warm-up batch(es) excluded. TTFT is send → first non-empty delta; latency is send → last content chunk; TPOT = (latency − TTFT) / (tokens − 1).</p>",
        escape(&r.target.to_string()),
        escape(r.model.as_deref().unwrap_or("?")),
        if r.loopback { "loopback" } else { "remote: synthetic prompts only" },
        r.batches,
        r.concurrency,
        r.max_tokens,
        r.warmup_batches
    );
    pass_html(&mut out, &r.text_only, r.sample_period_ms);
    if let Some(p) = &r.with_audio {
        pass_html(&mut out, p, r.sample_period_ms);
    }
    if let Some(a) = &r.audio {
        let _ = write!(
            out,
            "<section><h2>Audio job ({:.1} s clip)</h2><table><tr><th></th><th>n</th><th>mean</th><th>std</th><th>p50</th><th>p95</th><th>p99</th><th>max (ms)</th></tr>{}{}</table><p>Median under text load / idle: <b>{}</b></p></section>",
            a.clip_seconds,
            summary_row("idle", &a.idle),
            summary_row("under text load", &a.under_text_load),
            a.p50_ratio
                .map(|x| format!("{x:.2}×"))
                .unwrap_or_else(|| "n/a".into())
        );
    }
    if let Some(s) = &r.soak {
        let _ = write!(
            out,
            "<section><h2>Soak: {} runs</h2><p><b>{}</b></p><ul>{}</ul></section>",
            s.runs.len(),
            escape(&s.report.summary),
            s.report
                .reasoning
                .iter()
                .map(|l| format!("<li>{}</li>", escape(l)))
                .collect::<String>()
        );
    }
    let _ = writeln!(
        out,
        "<details><summary>Raw JSON</summary><pre>{}</pre></details></body></html>",
        escape(&serde_json::to_string_pretty(r).unwrap_or_default())
    );
    out
}

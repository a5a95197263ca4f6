//! `headroom bench fleet` in its smallest form: simulated upstreams (so the CPU of a loaded CI
//! machine does not decide the figures), one and two of them at the same offered load per
//! upstream, and one of two killed under load. The figures are checked for shape and sense,
//! never for speed.

use serde_json::Value;
use std::process::Command;

fn fleet_bench(extra: &[&str]) -> (Value, String) {
    let config =
        std::env::temp_dir().join(format!("headroom-fleet-bench-{}.toml", std::process::id()));
    std::fs::write(&config, "# defaults\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["bench", "fleet"])
        .args(extra)
        .env("HEADROOM_CONFIG", &config)
        .env_remove("HEADROOM_LLM_URL")
        .env_remove("HEADROOM_API_KEY")
        .output()
        .expect("headroom runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "bench fleet failed:\n{stderr}");
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the JSON report on stdout: {e}\n{stderr}"));
    (report, stderr)
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is a number in {v}"))
}

#[test]
fn one_and_two_simulated_upstreams_and_one_killed_under_load() {
    let (report, stderr) = fleet_bench(&[
        "--simulated",
        "--sizes",
        "1,2",
        "--rate-per-upstream",
        "3",
        "--seconds",
        "3",
        "--warmup",
        "0.5",
        "--kill-with",
        "2",
        "--kill-after",
        "1.5",
        "--kill-watch",
        "2",
    ]);
    assert_eq!(report["backend"]["kind"], "simulated", "{report}");
    assert_eq!(report["max_in_flight_per_upstream"], 2);
    assert_eq!(report["max_waiting"], 0);
    assert!(stderr.contains("simulated upstreams"), "{stderr}");
    assert!(stderr.contains("TTFT p99"), "the readable table: {stderr}");

    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{report}");
    for (i, row) in rows.iter().enumerate() {
        let n = i as u64 + 1;
        assert_eq!(row["upstreams"], n);
        assert_eq!(row["capacity"], 2 * n, "two slots each: {row}");
        assert!((num(row, "rate_per_upstream") - 3.0).abs() < 1e-9);
        let offered = num(row, "offered");
        let (rejected, failed, completed) = (
            num(row, "rejected"),
            num(row, "failed"),
            num(row, "completed"),
        );
        assert!(
            offered > 0.0 && rejected + failed + completed <= offered,
            "{row}"
        );
        let rate = num(row, "rejection_rate");
        assert!((0.0..=1.0).contains(&rate) && (rate - rejected / offered).abs() < 1e-9);
        assert!(
            completed > 0.0 && num(row, "output_tokens_per_s") > 0.0,
            "{row}"
        );
        let ttft = &row["ttft"];
        assert!(num(ttft, "p50_ms") > 0.0 && num(ttft, "p50_ms") <= num(ttft, "p99_ms"));
        assert_eq!(
            row["answered_per_upstream"].as_object().unwrap().len(),
            n as usize
        );
    }
    // Twice the upstreams at the same load per upstream: twice the arrivals, and more run.
    let admitted = |row: &Value| num(row, "offered") - num(row, "rejected");
    assert!(num(&rows[1], "offered") > num(&rows[0], "offered"));
    assert!(
        admitted(&rows[1]) > admitted(&rows[0]),
        "two upstreams admit more than one: {rows:?}"
    );

    let kills = report["kills"].as_array().expect("kills");
    assert_eq!(kills.len(), 1);
    let kill = &kills[0];
    assert_eq!(kill["upstreams"], 2);
    assert_eq!(kill["capacity_before"], 4);
    // The kill can only fail the streams that were on the killed upstream: two slots at most.
    assert!(num(kill, "streams_on_it") <= 2.0, "{kill}");
    assert!(num(kill, "failed_by_kill") <= 2.0, "{kill}");
    assert_eq!(kill["answered_by_it_after_kill"], 0, "it is dead: {kill}");
    if !kill["marked_down_after_ms"].is_null() {
        assert!(num(kill, "marked_down_after_ms") >= 0.0);
        assert_eq!(kill["capacity_after"], 2, "{kill}");
    }
    for part in ["before", "after"] {
        let w = &kill[part];
        assert!(num(w, "refused") <= num(w, "offered"), "{w}");
    }
    assert!(num(&kill["after"], "offered") > 0.0, "{kill}");
    assert!(stderr.contains("== kill: 2 upstreams"), "{stderr}");
}

#[test]
fn the_upstreams_must_be_named() {
    // An empty config file: the defaults, whatever the machine's own config says.
    let empty = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["bench", "fleet", "--sizes", "1"])
        .env("HEADROOM_CONFIG", empty.path())
        .output()
        .expect("headroom runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--simulated"), "{stderr}");
}

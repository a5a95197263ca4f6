//! A benchmark's JSON report: `headroom bench` and the benchmarks it runs in modules of their
//! own (`bench_fleet`, `bench_speech`) write it the same way.

use serde::Serialize;
use std::path::PathBuf;

/// Writes `report` as pretty JSON to `path` when given, else to standard output.
pub(crate) fn write_json(path: &Option<PathBuf>, report: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    match path {
        Some(p) => std::fs::write(p, text + "\n")?,
        None => println!("{text}"),
    }
    Ok(())
}

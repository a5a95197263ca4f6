//! A benchmark's JSON report, written the same way by every `headroom bench` command: whole or
//! not at all (an atomic write), so a report a script reads is never half a run's.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// Writes `report` as pretty JSON to `path` when given, else to standard output.
pub(crate) fn write_json(path: &Option<PathBuf>, report: &impl Serialize) -> anyhow::Result<()> {
    match path {
        Some(path) => save_json(Some(path), report),
        None => {
            println!("{}", serde_json::to_string_pretty(report)?);
            Ok(())
        }
    }
}

/// Writes `report` as pretty JSON to `path` when given (the commands that print a table
/// instead of JSON).
pub(crate) fn save_json(path: Option<&Path>, report: &impl Serialize) -> anyhow::Result<()> {
    let Some(path) = path else {
        return Ok(());
    };
    let text = serde_json::to_string_pretty(report)? + "\n";
    headroom_base::fsutil::write_atomic(path, text.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

//! Finding what a command names: a project by its id or name, and a voice as projects keep it.
//! Shared by `headroom project`, `headroom narrate` and the MCP server's project tools.

use anyhow::Context;
use headroom_workstation::projects::{ProjectEntry, ProjectStore};
use headroom_workstation::workstation::Workstation;

/// A voice as projects keep it (see [`headroom_services::Services::stored_voice_name`]).
pub(crate) async fn project_voice(ws: &Workstation, voice: String) -> anyhow::Result<String> {
    Ok(ws.services().stored_voice_name(&voice).await?)
}

/// A project by its id (folder name) or, failing that, its name (case-insensitive).
pub(crate) fn resolve(store: &ProjectStore, wanted: &str) -> anyhow::Result<String> {
    if store.open(wanted).is_ok() {
        return Ok(wanted.to_string());
    }
    let found = store.list()?.into_iter().find_map(|e| match e {
        ProjectEntry::Ok { id, name, .. } if name.eq_ignore_ascii_case(wanted.trim()) => Some(id),
        _ => None,
    });
    found.with_context(|| format!("no project {wanted:?} (see `headroom project list`)"))
}

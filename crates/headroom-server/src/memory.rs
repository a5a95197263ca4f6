//! The server's memory: the speech models it holds (`GET /v1/headroom/memory`) and "free
//! memory" (`POST /v1/headroom/memory/free`), which lets go of every model no request is using.

use crate::state::ServerState;
use axum::extract::State;
use axum::Json;
use headroom_services::residency::MemoryView;
use std::sync::Arc;

pub(crate) async fn memory(State(state): State<Arc<ServerState>>) -> Json<MemoryView> {
    Json(state.speech.residency().view(Vec::new()))
}

pub(crate) async fn free_memory(State(state): State<Arc<ServerState>>) -> Json<MemoryView> {
    let residency = state.speech.residency();
    let released = residency.free_memory();
    Json(residency.view(released))
}

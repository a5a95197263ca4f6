//! What the handlers share: borrowed from the process's [`Services`], so the chat endpoint's
//! text lane yields to the very audio lane the speech endpoints run on.

use crate::auth::TokenGate;
use crate::body_budget::BodyBudget;
use crate::connections::{ConnectionLimit, ConnectionPolicy};
use crate::min_rate::MinRate;
use headroom_core::lanes::TextLane;
use headroom_core::metrics::Metrics;
use headroom_services::speech::SpeechService;
use headroom_services::{Services, ServicesError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

pub struct ServerState {
    pub text_lane: TextLane,
    /// The embedded speech engines on the services' audio lane.
    pub speech: Arc<SpeechService>,
    /// Voice profiles, spoken by name on `/v1/audio/speech`.
    pub voices: headroom_services::voice_work::Voices,
    pub metrics: Arc<Metrics>,
    /// GPU memory readings, exported with the metrics (in use, and the floor).
    pub gpu: headroom_gpu::GpuSampler,
    /// The services themselves, for what they compute over time (the crossed signals).
    pub services: Arc<Services>,
    pub max_body_bytes: usize,
    /// Largest audio upload for transcription.
    pub max_upload_bytes: usize,
    /// One permit per upload being received.
    pub upload_slots: Arc<Semaphore>,
    pub max_concurrent_uploads: usize,
    /// Where uploads are received.
    pub upload_dir: PathBuf,
    /// Browser origins allowed to call this server (none by default).
    pub allowed_origins: Vec<String>,
    /// Connections open at once, and how long headers may take.
    pub connections: ConnectionPolicy,
    /// The slowest request body accepted.
    pub min_rate: MinRate,
    /// Bytes of request bodies held in memory at once, across all requests.
    pub body_budget: BodyBudget,
    /// The bearer token every route but `/health` requires, if any.
    pub token: TokenGate,
}

impl ServerState {
    /// Counts a refusal that comes before any lane (connection, body, token) in the metrics.
    pub(crate) fn count_refusal(&self, error: &crate::HttpError) {
        let code = error.code();
        if crate::error::CONNECTION_REFUSALS.contains(&code) {
            self.metrics.count_connection_refusal(code, 1);
        }
    }

    /// The server `headroom serve` runs: the configured upstream's shared text lane, with the
    /// settings' consent (`--allow-remote`, `privacy.allow_remote`) for its upstreams elsewhere.
    pub fn from_services(services: &Services) -> Result<ServerState, ServicesError> {
        let consent = services.config().privacy.consent();
        Ok(Self::with_text_lane(
            services,
            services.default_text_lane(&consent)?,
        ))
    }

    /// A server in front of `text_lane` (one of `services`' lanes, e.g. a benchmark's
    /// dedicated lane), with the services' speech, metrics and limits.
    pub fn with_text_lane(services: &Services, text_lane: TextLane) -> ServerState {
        let limits = services.config().server;
        let read_timeout = limits.read_timeout().unwrap_or(Duration::from_secs(10));
        let metrics = services.metrics().clone();
        // Every refusal before a lane is a series from the start, zero until it happens.
        for &reason in crate::error::CONNECTION_REFUSALS {
            metrics.count_connection_refusal(reason, 0);
        }
        ServerState {
            connections: ConnectionPolicy {
                limit: ConnectionLimit::new(limits.max_connections),
                header_timeout: read_timeout,
                write_timeout: limits.write_timeout().unwrap_or(Duration::from_secs(10)),
            },
            min_rate: MinRate::new(read_timeout, limits.min_read_bytes_per_sec),
            body_budget: BodyBudget::new(limits.max_buffered_body_bytes),
            token: TokenGate {
                token: limits.token.clone(),
            },
            text_lane,
            speech: services.speech().clone(),
            voices: services.voices(),
            metrics,
            gpu: services.gpu().clone(),
            services: services.shared(),
            max_body_bytes: limits.max_body_bytes,
            max_upload_bytes: limits.max_upload_bytes,
            upload_slots: Arc::new(Semaphore::new(limits.max_concurrent_uploads)),
            max_concurrent_uploads: limits.max_concurrent_uploads,
            upload_dir: services.env().temp_dir.clone(),
            allowed_origins: limits.allowed_origins,
        }
    }
}

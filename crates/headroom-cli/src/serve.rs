use crate::LaneArgs;
use clap::Args;
use headroom_core::config::Config;
use headroom_core::gpu::{self, GpuSampler};
use headroom_core::lanes::{AudioLane, TextLane};
use headroom_core::llm::LlmClient;
use headroom_core::metrics::Metrics;
use headroom_core::server::{bind_loopback, serve, ServerState};
use headroom_core::speech::SpeechService;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Loopback address to listen on, e.g. 127.0.0.1:8089.
    #[arg(long)]
    listen: Option<String>,
    /// The text model's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.
    #[arg(long)]
    upstream: Option<String>,
    /// Model for requests that name none (default: the upstream's first model).
    #[arg(long)]
    model: Option<String>,
    /// Largest request body in bytes.
    #[arg(long)]
    max_body_bytes: Option<usize>,
    #[command(flatten)]
    lane: LaneArgs,
}

pub async fn run(args: ServeArgs, mut config: Config) -> anyhow::Result<ExitCode> {
    if let Some(listen) = args.listen {
        config.server.listen = listen;
    }
    if let Some(upstream) = args.upstream {
        config.llm.url = upstream;
    }
    if let Some(model) = args.model {
        config.llm.model = Some(model);
    }
    if let Some(max) = args.max_body_bytes {
        config.server.max_body_bytes = max;
    }
    args.lane.apply(&mut config);
    let listener = bind_loopback(&config.server.listen).await?;
    let client = LlmClient::new(&config.llm.url, config.llm.api_key())?;
    let metrics = Arc::new(Metrics::new());
    let audio_lane = AudioLane::new(config.audio_lane(), metrics.clone());
    // The text lane yields to the audio lane's interactive jobs (text_lane.yield_to_audio).
    let lane_config = config.text_lane()?;
    // The GPU gate samples device memory only when an audio headroom is set.
    let gpu = lane_config
        .audio_headroom_mib
        .map(|_| GpuSampler::start(gpu::DEFAULT_PERIOD, gpu::DEFAULT_CAPACITY));
    let text_lane = TextLane::guarded(
        client,
        lane_config,
        metrics.clone(),
        audio_lane.activity(),
        gpu,
    );
    match text_lane.discover().await {
        Ok(info) => eprintln!(
            "headroom: upstream {} is up: model {}, context {} tokens",
            config.llm.url,
            text_lane.model().unwrap_or_else(|| "(unnamed)".into()),
            info.context_tokens.unwrap_or(text_lane.context_tokens())
        ),
        Err(e) => eprintln!(
            "headroom: upstream {} is not answering yet ({e}); requests get 502 until it does",
            config.llm.url
        ),
    }
    let lane_config = text_lane.config();
    eprintln!(
        "headroom: serving http://{}/v1 — text lane: {} in flight, {} waiting, context {} tokens",
        listener.local_addr()?,
        lane_config.max_in_flight,
        lane_config.max_waiting,
        text_lane.context_tokens()
    );
    let state = Arc::new(ServerState {
        speech: Arc::new(SpeechService::new(AudioLane::new(
            config.audio_lane(),
            metrics.clone(),
        ))),
        text_lane,
        metrics,
        max_body_bytes: config.server.max_body_bytes,
        max_upload_bytes: config.server.max_upload_bytes,
    });
    serve(listener, state, async {
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("headroom: shutting down");
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

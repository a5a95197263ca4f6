use crate::LaneArgs;
use clap::Args;
use headroom_base::redact::SecretUrl;
use headroom_core::config::{Config, ServeToken, UpstreamSettings};
use headroom_server::{bind_loopback, serve, ServerState};
use headroom_services::Services;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Loopback address to listen on, e.g. 127.0.0.1:8089.
    #[arg(long)]
    listen: Option<String>,
    /// The text model's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1. Given more
    /// than once, the text lane spans them all: each gets its own slots, health and breaker.
    #[arg(long, value_name = "URL")]
    upstream: Vec<String>,
    /// Requests an upstream is given at once (a router, or a vLLM server, which does not say):
    /// once for all upstreams, or once per --upstream in the same order. Default:
    /// text_lane.max_in_flight, or fewer when the server says it runs fewer (llama-server).
    #[arg(long, value_name = "N")]
    upstream_capacity: Vec<usize>,
    /// Model for requests that name none (default: the upstream's first model).
    #[arg(long)]
    model: Option<String>,
    /// Largest request body in bytes.
    #[arg(long)]
    max_body_bytes: Option<usize>,
    /// Require `Authorization: Bearer TOKEN` on every route but /health. Other users can see
    /// a command line: prefer HEADROOM_SERVE_TOKEN or server.token in the config file.
    #[arg(long, visible_alias = "api-key", value_name = "TOKEN")]
    token: Option<ServeToken>,
    #[command(flatten)]
    lane: LaneArgs,
}

impl ServeArgs {
    /// Applies the flags that change settings, before the services are built.
    pub fn configure(&self, config: &mut Config) {
        if let Some(listen) = &self.listen {
            config.server.listen = listen.clone();
        }
        if let Some((first, more)) = self.upstream.split_first() {
            config.llm.url = first.clone();
            config.llm.capacity = None;
            config.llm.upstreams = more
                .iter()
                .map(|url| UpstreamSettings {
                    url: url.clone(),
                    capacity: None,
                })
                .collect();
        }
        // The capacities go onto the whole fleet, the flags' or the config file's: one for
        // all, or one per upstream in order (any other count is refused when serve starts).
        let upstreams = 1 + config.llm.upstreams.len();
        let each = match self.upstream_capacity.as_slice() {
            [all] => vec![*all; upstreams],
            each if each.len() == upstreams => each.to_vec(),
            _ => Vec::new(),
        };
        if let Some((first, more)) = each.split_first() {
            config.llm.capacity = Some(*first);
            for (upstream, capacity) in config.llm.upstreams.iter_mut().zip(more) {
                upstream.capacity = Some(*capacity);
            }
        }
        if let Some(model) = &self.model {
            config.llm.model = Some(model.clone());
        }
        if let Some(max) = self.max_body_bytes {
            config.server.max_body_bytes = max;
        }
        // The flag wins over the file and HEADROOM_SERVE_TOKEN; an empty one changes nothing.
        if let Some(token) = self.token.clone().filter(|t| !t.is_empty()) {
            config.server.token = Some(token);
        }
        self.lane.apply(config);
    }
}

pub async fn run(args: ServeArgs, services: &Services) -> anyhow::Result<ExitCode> {
    let config = services.config();
    let upstreams = config.llm.fleet().len();
    let capacities = args.upstream_capacity.len();
    if capacities > 1 && capacities != upstreams {
        anyhow::bail!(
            "--upstream-capacity was given {capacities} times for {upstreams} upstream(s): give it once for all of them, or once per upstream in order"
        );
    }
    // What clients send to the chat endpoint is relayed to the upstreams: a server on another
    // machine must be allowed (--allow-remote, privacy.allow_remote) before serve starts. The
    // chat endpoint's text lane yields to the same audio lane the speech endpoints use
    // (text_lane.yield_to_audio), and watches GPU memory when an audio headroom is set.
    let state = Arc::new(ServerState::from_services(services)?);
    let listener = bind_loopback(&config.server.listen).await?;
    let text_lane = &state.text_lane;
    let discovered = text_lane.discover().await;
    if text_lane.fleet().len() > 1 {
        for upstream in text_lane.snapshot().upstreams {
            match upstream.down_reason {
                None => eprintln!(
                    "headroom: upstream {} is up: {} at once, context {} tokens",
                    upstream.name,
                    upstream.capacity,
                    upstream
                        .context_tokens
                        .map_or("unknown".into(), |c| c.to_string())
                ),
                Some(reason) => eprintln!(
                    "headroom: upstream {} is not answering yet ({reason}); requests go to the others until it does",
                    upstream.name
                ),
            }
        }
    }
    match discovered {
        Ok(info) => eprintln!(
            "headroom: upstream {} is up: model {}, context {} tokens",
            SecretUrl::from(config.llm.url.as_str()),
            text_lane.model().unwrap_or_else(|| "(unnamed)".into()),
            info.context_tokens.unwrap_or(text_lane.context_tokens())
        ),
        Err(e) => eprintln!(
            "headroom: upstream {} is not answering yet ({e}); requests get 502 until it does",
            SecretUrl::from(config.llm.url.as_str())
        ),
    }
    let lane_config = text_lane.config();
    eprintln!(
        "headroom: serving http://{}/v1 — text lane: {} in flight over {} upstream(s), {} waiting, context {} tokens",
        listener.local_addr()?,
        text_lane.snapshot().occupancy.limit,
        text_lane.fleet().len(),
        lane_config.max_waiting,
        text_lane.context_tokens()
    );
    let server = &config.server;
    eprintln!(
        "headroom: {}; at most {} connections; a client has {} s for its headers and sends at least {} bytes/s; {} MiB for request bodies at once",
        if server.token.is_some() {
            "a bearer token is required on every route but /health"
        } else {
            "no token required (any local process may call; set HEADROOM_SERVE_TOKEN to require one)"
        },
        server.max_connections,
        server.read_timeout_secs,
        server.min_read_bytes_per_sec,
        server.max_buffered_body_bytes / (1024 * 1024),
    );
    serve(listener, state, async {
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("headroom: shutting down");
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

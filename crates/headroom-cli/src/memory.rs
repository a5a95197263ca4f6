//! `headroom memory`: the speech models a running `headroom serve` holds, what each cost to
//! load, and `--free` to let go of every model no request is using.

use anyhow::Context;
use clap::Args;
use headroom_services::Services;
use serde::Deserialize;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct MemoryArgs {
    /// Let go of every model no request is using (they load again when next needed).
    #[arg(long)]
    free: bool,
    /// The server to ask (default: `server.listen` from the config, as `headroom serve` binds).
    #[arg(long)]
    server: Option<String>,
}

/// `/v1/headroom/memory`'s answer (headroom_services::residency::MemoryView), as read here.
#[derive(Deserialize)]
struct MemoryView {
    process_mib: Option<f64>,
    idle_after_secs: Option<f64>,
    models: Vec<ResidentModel>,
    released: Vec<ResidentModel>,
}

#[derive(Deserialize)]
struct ResidentModel {
    name: String,
    role: String,
    resident_mib: Option<f64>,
    idle_secs: f64,
    in_use: bool,
}

fn mib(value: Option<f64>) -> String {
    value.map_or("?".into(), |m| format!("{m:.0} MiB"))
}

pub async fn run(args: MemoryArgs, services: &Services) -> anyhow::Result<ExitCode> {
    let base = args
        .server
        .clone()
        .unwrap_or_else(|| format!("http://{}", services.config().server.listen));
    let base = base.trim_end_matches('/').trim_end_matches("/v1");
    let client = headroom_base::http::client();
    let request = if args.free {
        client
            .post(format!("{base}/v1/headroom/memory/free"))
            .json(&serde_json::json!({}))
    } else {
        client.get(format!("{base}/v1/headroom/memory"))
    };
    // serve started with a token (as the README advises) answers nothing without it.
    let request = match &services.config().server.token {
        Some(token) => token.authorize(request),
        None => request,
    };
    let view: MemoryView = request
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .with_context(|| format!("cannot ask headroom serve at {base} (is it running?)"))?
        .json()
        .await
        .context("headroom serve answered something else than its memory view")?;
    for m in &view.released {
        println!("let go of {} ({}, {})", m.name, m.role, mib(m.resident_mib));
    }
    if args.free && view.released.is_empty() {
        println!("no model was idle: nothing to let go of");
    }
    println!(
        "headroom serve at {base}: {} resident",
        mib(view.process_mib)
    );
    if view.models.is_empty() {
        println!("  no speech model loaded");
    }
    for m in &view.models {
        let state = if m.in_use {
            "in use".to_string()
        } else {
            format!("idle {:.0} s", m.idle_secs)
        };
        println!(
            "  {:<24} {:<18} {:>8}  {state}",
            m.name,
            m.role,
            mib(m.resident_mib)
        );
    }
    match view.idle_after_secs {
        Some(secs) => println!("models unused for {secs:.0} s are let go"),
        None => println!("models stay loaded until memory is freed"),
    }
    Ok(ExitCode::SUCCESS)
}

use clap::Args;
use headroom_core::config::Config;
use headroom_gpu::GpuStatus;
use headroom_services::Services;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// OpenAI-compatible server to check (default: from config / $HEADROOM_LLM_URL).
    #[arg(long)]
    llm_url: Option<String>,
}

/// Prints one line per check; exits non-zero when the text model server is not usable.
impl DoctorArgs {
    /// Applies the flags that change settings, before the services are built.
    pub fn configure(&self, config: &mut Config) {
        if let Some(url) = &self.llm_url {
            config.llm.url = url.clone();
        }
    }
}

pub async fn run(_args: DoctorArgs, services: &Services) -> anyhow::Result<ExitCode> {
    let config = services.config();
    match services
        .env()
        .config_file
        .clone()
        .or_else(Config::default_path)
    {
        Some(p) if p.exists() => println!("config      {}", p.display()),
        Some(p) => println!("config      defaults ({} does not exist)", p.display()),
        None => println!("config      defaults (no config directory on this platform)"),
    }
    let client = services.client(&config.llm.url)?;
    let mut healthy = true;
    match client.health().await {
        Ok(()) => println!(
            "server      ok: {} is up",
            headroom_base::redact::SecretUrl::from(config.llm.url.as_str())
        ),
        Err(e) => {
            healthy = false;
            println!("server      FAIL: {e}");
        }
    }
    match client.server_info().await {
        Ok(info) => {
            let names: Vec<&str> = info.models.iter().map(|m| m.id.as_str()).collect();
            println!(
                "models      {}",
                if names.is_empty() {
                    "(none listed)".into()
                } else {
                    names.join(", ")
                }
            );
            match info.context_tokens {
                Some(n) => println!("context     {n} tokens per request"),
                None => println!(
                    "context     not reported by the server; assuming {}",
                    config
                        .text_lane
                        .context_tokens
                        .unwrap_or(headroom_core::lanes::DEFAULT_CONTEXT_TOKENS)
                ),
            }
            if let Some(wanted) = &config.llm.model {
                if !names.contains(&wanted.as_str()) {
                    healthy = false;
                    println!("model       FAIL: configured model {wanted:?} is not served");
                }
            }
        }
        Err(e) => {
            healthy = false;
            println!("models      FAIL: {e}");
        }
    }
    println!("gpu         {}", GpuStatus::probe().describe());
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

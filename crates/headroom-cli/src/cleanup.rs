use crate::{cancel_on_ctrl_c, LaneArgs, EXIT_CANCELLED, EXIT_REJECTED};
use anyhow::Context;
use clap::Args;
use headroom_core::admission::{human_duration, Rejection, SuggestedAction};
use headroom_core::cleanup::{
    clean_document, clean_offline, CleanupError, CleanupEvent, CleanupMode, CleanupOutput,
    CleanupRequest, FailurePolicy, PieceSource,
};
use headroom_core::config::Config;
use headroom_services::Services;
use std::path::PathBuf;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct CleanupArgs {
    /// The transcript (UTF-8 text).
    file: PathBuf,
    /// OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (or $HEADROOM_LLM_URL).
    #[arg(long)]
    llm_url: Option<String>,
    /// Model name (default: the server's first model).
    #[arg(long)]
    model: Option<String>,
    /// cleanup: remove speech noise; rewrite: clear narration.
    #[arg(long)]
    mode: Option<CleanupMode>,
    /// When the text model refuses: reject (stop, exit 3), fallback (rule-based cleanup), retry.
    #[arg(long)]
    policy: Option<FailurePolicy>,
    /// Attempts in all with --policy retry.
    #[arg(long)]
    retries: Option<u32>,
    /// Use only the rule-based cleanup; nothing leaves the machine.
    #[arg(long)]
    no_llm: bool,
    /// Print the result as JSON (pieces and where each came from).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    lane: LaneArgs,
}

impl CleanupArgs {
    /// Applies the flags that change settings, before the services are built.
    pub fn configure(&self, config: &mut Config) {
        if let Some(url) = &self.llm_url {
            config.llm.url = url.clone();
        }
        if let Some(model) = &self.model {
            config.llm.model = Some(model.clone());
        }
        if let Some(retries) = self.retries {
            config.cleanup.retry_attempts = retries;
        }
        self.lane.apply(config);
    }
}

/// The largest transcript file `cleanup` reads (some ten days of speech as text).
const MAX_TRANSCRIPT_BYTES: u64 = 64 << 20;

pub async fn run(args: CleanupArgs, services: &Services) -> anyhow::Result<ExitCode> {
    let text = headroom_base::input::read_regular(&args.file, MAX_TRANSCRIPT_BYTES)
        .and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .with_context(|| format!("cannot read the transcript {}", args.file.display()))?;
    if text.trim().is_empty() {
        anyhow::bail!("the transcript {} is empty", args.file.display());
    }
    if args.no_llm {
        print_output(&clean_offline(&text), args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    // The transcript leaves the machine only for a server the user allowed.
    let config = services.config();
    let lane = services.default_text_lane(&config.privacy.consent())?;
    if let Err(e) = lane.discover().await {
        // Not fatal: the request itself will be refused and the policy decides.
        tracing::info!("text model discovery failed: {e}");
    }
    let request = CleanupRequest {
        text,
        task: args.mode.unwrap_or(config.cleanup.mode).into(),
        length_hint: None,
        policy: args.policy.unwrap_or(config.cleanup.policy),
        retry: config.retry()?,
        project: None,
    };
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(cancel.clone());
    let progress = |event: CleanupEvent| match event {
        CleanupEvent::Planned { chunks } if chunks > 1 => {
            eprintln!("headroom: {chunks} chunks, sent one at a time")
        }
        CleanupEvent::Retrying {
            index,
            attempt,
            wait_ms,
            rejection,
        } => eprintln!(
            "headroom: chunk {} attempt {attempt} refused ({}); retrying in {}",
            index + 1,
            rejection.reason,
            human_duration(std::time::Duration::from_millis(wait_ms))
        ),
        CleanupEvent::ChunkFinished {
            index,
            source: PieceSource::RuleBased { because: Some(r) },
        } => eprintln!(
            "headroom: chunk {} used the rule-based cleanup because: {}",
            index + 1,
            r.message()
        ),
        _ => {}
    };
    match clean_document(&lane, &request, &cancel, &progress).await {
        Ok(output) => {
            print_output(&output, args.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(CleanupError::Rejected {
            rejection,
            chunk,
            completed,
        }) => {
            explain_rejection(&rejection, chunk, completed.len());
            Ok(ExitCode::from(EXIT_REJECTED))
        }
        Err(CleanupError::Cancelled { completed }) => {
            eprintln!(
                "headroom: cancelled after {} chunk(s); nothing was written",
                completed.len()
            );
            Ok(ExitCode::from(EXIT_CANCELLED))
        }
    }
}

fn print_output(output: &CleanupOutput, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(output)?);
    } else {
        println!("{}", output.text());
    }
    Ok(())
}

fn explain_rejection(r: &Rejection, chunk: usize, completed: usize) {
    eprintln!("headroom: the text model did not clean this transcript.");
    eprintln!("  {}", r.message());
    eprintln!("  reason: {}", r.reason);
    if completed > 0 {
        eprintln!(
            "  {completed} chunk(s) were done before chunk {} was refused",
            chunk + 1
        );
    }
    for action in r.suggested_actions() {
        let line = match action {
            SuggestedAction::RetryAfter { after_ms } => format!(
                "run it again in about {}, or with --policy retry",
                human_duration(std::time::Duration::from_millis(after_ms))
            ),
            SuggestedAction::UseRuleBasedCleanup => {
                "use --policy fallback (rule-based cleanup where the model refuses) or --no-llm"
                    .into()
            }
            SuggestedAction::SplitInput => {
                "split the text, or raise --context-tokens if the model allows".into()
            }
            SuggestedAction::CheckServer => "check the server with `headroom doctor`".into(),
        };
        eprintln!("  → {line}");
    }
}

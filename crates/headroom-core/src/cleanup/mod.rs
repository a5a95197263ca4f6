//! Transcript cleanup, narration rewrite and translation through the text lane.
//!
//! A document is split into chunks that fit the model's context ([`chunking`]) and sent one at
//! a time, so a long document never holds more than one text slot. When the lane refuses a
//! chunk, the request's [`FailurePolicy`] decides: stop with the rejection, clean that chunk
//! with the rules ([`rules`]), or retry within the deadline. The result says which path
//! produced each piece.

pub mod chunking;
mod prompts;
mod reply_check;
pub mod rules;

pub use prompts::{CleanupMode, LengthHint, TextTask};

use crate::admission::{RejectReason, Rejection};
use crate::lanes::TextLane;
use crate::llm::{ChatMessage, ChatRequest};
use crate::metrics::{PieceOrigin, NO_PROJECT};
use futures::StreamExt;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What happens when the text lane refuses a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum FailurePolicy {
    /// Stop and show the rejection (the default: overload stays visible).
    #[default]
    Reject,
    /// Clean the refused chunk with the rule-based cleanup and go on.
    Fallback,
    /// Retry retryable rejections with jittered backoff, within the request's total deadline.
    Retry,
}

impl std::str::FromStr for FailurePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "reject" => Ok(FailurePolicy::Reject),
            "fallback" => Ok(FailurePolicy::Fallback),
            "retry" => Ok(FailurePolicy::Retry),
            other => Err(format!(
                "unknown policy {other:?}: use reject, fallback or retry"
            )),
        }
    }
}

/// Bounds for [`FailurePolicy::Retry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RetrySettings {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    pub base_backoff: Duration,
    /// Overall time for one chunk, all attempts and waits included.
    pub budget: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            max_attempts: 3,
            base_backoff: Duration::from_millis(250),
            budget: Duration::from_secs(120),
        }
    }
}

/// A cleanup job.
#[derive(Debug, Clone)]
pub struct CleanupRequest {
    pub text: String,
    /// Clean up, rewrite or translate.
    pub task: TextTask,
    /// How long the result may be when spoken (narration); `None` leaves it to the task.
    pub length_hint: Option<LengthHint>,
    pub policy: FailurePolicy,
    pub retry: RetrySettings,
    /// The project the text belongs to, for the per-project metrics (fallback rate, retries);
    /// `None` outside a project.
    pub project: Option<String>,
}

impl CleanupRequest {
    fn metrics_project(&self) -> &str {
        self.project.as_deref().unwrap_or(NO_PROJECT)
    }
}

/// Which path produced a piece of text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PieceSource {
    /// The text model, after this many attempts.
    Llm { attempts: u32 },
    /// The rule-based cleanup; `because` is the rejection that caused the fallback, or `None`
    /// when LLM cleanup is switched off.
    RuleBased { because: Option<Rejection> },
    /// Nothing to clean (blank).
    Unchanged,
}

/// One chunk's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CleanedPiece {
    pub original: String,
    pub text: String,
    /// The whitespace that followed the chunk in the document.
    pub separator: String,
    pub source: PieceSource,
}

/// The cleaned document, piece by piece.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CleanupOutput {
    pub pieces: Vec<CleanedPiece>,
}

impl CleanupOutput {
    pub fn text(&self) -> String {
        join_pieces(&self.pieces)
    }

    /// Pieces that came from the rule-based cleanup because of a rejection.
    pub fn fallbacks(&self) -> impl Iterator<Item = &Rejection> {
        self.pieces.iter().filter_map(|p| match &p.source {
            PieceSource::RuleBased { because } => because.as_ref(),
            _ => None,
        })
    }

    /// The reasons of [`CleanupOutput::fallbacks`], each once, in the order they first came.
    pub fn fallback_reasons(&self) -> Vec<RejectReason> {
        let mut reasons = Vec::new();
        for r in self.fallbacks() {
            if !reasons.contains(&r.reason) {
                reasons.push(r.reason);
            }
        }
        reasons
    }
}

fn join_pieces(pieces: &[CleanedPiece]) -> String {
    let mut text: String = pieces
        .iter()
        .map(|p| format!("{}{}", p.text, p.separator))
        .collect();
    text.truncate(text.trim_end().len());
    text
}

/// Progress of a cleanup, for a UI or a terminal.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum CleanupEvent {
    Planned {
        chunks: usize,
    },
    /// A chunk starts (again, after a retry: text streamed before belongs to a failed attempt).
    ChunkStarted {
        index: usize,
        attempt: u32,
    },
    Delta {
        index: usize,
        text: String,
    },
    Retrying {
        index: usize,
        attempt: u32,
        wait_ms: u64,
        rejection: Rejection,
    },
    ChunkFinished {
        index: usize,
        source: PieceSource,
    },
}

/// Why a cleanup stopped. Completed pieces are kept, so nothing done is lost.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CleanupError {
    #[error("{rejection}")]
    Rejected {
        rejection: Rejection,
        chunk: usize,
        completed: Vec<CleanedPiece>,
    },
    #[error("cleanup cancelled after {} of its chunks", completed.len())]
    Cancelled { completed: Vec<CleanedPiece> },
}

/// Cleans a document with the rules only: no request leaves the machine.
pub fn clean_offline(text: &str) -> CleanupOutput {
    CleanupOutput {
        pieces: vec![CleanedPiece {
            original: text.to_string(),
            text: rules::clean_transcript(text),
            separator: String::new(),
            source: PieceSource::RuleBased { because: None },
        }],
    }
}

/// Cleans or rewrites a document through the text lane, one chunk at a time.
pub async fn clean_document(
    lane: &TextLane,
    request: &CleanupRequest,
    cancel: &CancellationToken,
    on_event: &(dyn Fn(CleanupEvent) + Send + Sync),
) -> Result<CleanupOutput, CleanupError> {
    let config = lane.config();
    let system_chars = request
        .task
        .system_prompt(request.length_hint)
        .chars()
        .count();
    // A chunk of T estimated tokens has at most 3T bytes, hence at most 3T characters.
    let char_budget = (config.max_input_chars.saturating_sub(system_chars) / 3) as u32;
    let budget = request
        .task
        .chunk_budget(lane.context_tokens())
        .min(char_budget)
        .max(16);
    let chunks = chunking::split_into_chunks(&request.text, budget);
    let total_chars = request.text.chars().count();
    on_event(CleanupEvent::Planned {
        chunks: chunks.len(),
    });
    let mut pieces = Vec::with_capacity(chunks.len());
    for (index, chunk) in chunks.into_iter().enumerate() {
        if cancel.is_cancelled() {
            return Err(CleanupError::Cancelled { completed: pieces });
        }
        let source_and_text = if chunk.text.trim().is_empty() {
            Ok((PieceSource::Unchanged, chunk.text.clone()))
        } else {
            let hint = request
                .length_hint
                .map(|h| h.share(chunk.text.chars().count(), total_chars));
            let ask = Ask {
                task: request.task,
                hint,
                index,
                text: &chunk.text,
            };
            clean_chunk(lane, request, &ask, cancel, on_event).await
        };
        let (source, text) = match source_and_text {
            Ok(done) => done,
            Err(ChunkFailure::Cancelled) => {
                return Err(CleanupError::Cancelled { completed: pieces })
            }
            Err(ChunkFailure::Rejected(rejection)) => match request.policy {
                FailurePolicy::Fallback if rejection.reason != RejectReason::Cancelled => (
                    PieceSource::RuleBased {
                        because: Some(rejection),
                    },
                    rules::clean_transcript(&chunk.text),
                ),
                _ => {
                    return Err(CleanupError::Rejected {
                        rejection,
                        chunk: index,
                        completed: pieces,
                    })
                }
            },
        };
        lane.metrics().count_cleanup_piece(
            request.metrics_project(),
            match source {
                PieceSource::Llm { .. } => PieceOrigin::Model,
                PieceSource::RuleBased { .. } => PieceOrigin::Rules,
                PieceSource::Unchanged => PieceOrigin::Unchanged,
            },
        );
        on_event(CleanupEvent::ChunkFinished {
            index,
            source: source.clone(),
        });
        pieces.push(CleanedPiece {
            original: chunk.text,
            text,
            separator: chunk.separator,
            source,
        });
    }
    Ok(CleanupOutput { pieces })
}

enum ChunkFailure {
    Rejected(Rejection),
    Cancelled,
}

/// One chunk's question to the model.
struct Ask<'a> {
    task: TextTask,
    hint: Option<LengthHint>,
    index: usize,
    text: &'a str,
}

async fn clean_chunk(
    lane: &TextLane,
    request: &CleanupRequest,
    ask: &Ask<'_>,
    cancel: &CancellationToken,
    on_event: &(dyn Fn(CleanupEvent) + Send + Sync),
) -> Result<(PieceSource, String), ChunkFailure> {
    let index = ask.index;
    let started = Instant::now();
    let mut attempt = 1;
    loop {
        on_event(CleanupEvent::ChunkStarted { index, attempt });
        let metrics = lane.metrics();
        metrics.count_cleanup_attempt(request.metrics_project());
        let result = tokio::select! {
            r = ask_model(lane, ask, on_event) => r,
            _ = cancel.cancelled() => return Err(ChunkFailure::Cancelled),
        };
        let rejection = match result {
            Ok(cleaned) => return Ok((PieceSource::Llm { attempts: attempt }, cleaned)),
            Err(r) => r,
        };
        metrics.count_cleanup_rejection(request.metrics_project(), rejection.reason);
        let retry = request.policy == FailurePolicy::Retry
            && rejection.is_retryable()
            && attempt < request.retry.max_attempts;
        if !retry {
            return Err(ChunkFailure::Rejected(rejection));
        }
        let wait = backoff(request.retry.base_backoff, attempt)
            .max(rejection.retry_after.unwrap_or_default());
        if started.elapsed() + wait > request.retry.budget {
            return Err(ChunkFailure::Rejected(rejection));
        }
        on_event(CleanupEvent::Retrying {
            index,
            attempt,
            wait_ms: wait.as_millis() as u64,
            rejection,
        });
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.cancelled() => return Err(ChunkFailure::Cancelled),
        }
        attempt += 1;
    }
}

/// Exponential backoff with full jitter: a random wait in [base·2^(n-1) / 2, base·2^(n-1)].
fn backoff(base: Duration, attempt: u32) -> Duration {
    let ceiling = base.saturating_mul(1 << (attempt - 1).min(10));
    let low = ceiling / 2;
    let span = (ceiling - low).as_millis() as u64;
    low + Duration::from_millis(rand::rng().random_range(0..=span))
}

async fn ask_model(
    lane: &TextLane,
    ask: &Ask<'_>,
    on_event: &(dyn Fn(CleanupEvent) + Send + Sync),
) -> Result<String, Rejection> {
    let (index, text) = (ask.index, ask.text);
    let mut chat = ChatRequest::new(vec![
        ChatMessage::new("system", ask.task.system_prompt(ask.hint)),
        ChatMessage::new("user", text),
    ]);
    chat.max_tokens = Some(
        ask.task
            .reply_budget(crate::admission::estimate_tokens(text)),
    );
    chat.temperature = Some(0.0);
    let mut stream = lane.submit(chat).await?;
    let mut reply = String::new();
    let mut finish_reason = None;
    while let Some(item) = stream.next().await {
        let chunk = item?;
        finish_reason = chunk.finish_reason.clone().or(finish_reason);
        if let Some(delta) = chunk.text() {
            reply.push_str(delta);
            on_event(CleanupEvent::Delta {
                index,
                text: delta.to_string(),
            });
        }
    }
    let reply = reply.trim();
    if let Some(why) = reply_check::unusable_reply(ask.task, text, reply, finish_reason.as_deref())
    {
        return Err(lane.record_rejection(RejectReason::UnusableReply, why));
    }
    Ok(reply.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_jittered_within_bounds() {
        let base = Duration::from_millis(200);
        for attempt in 1..=4 {
            let ceiling = base * (1 << (attempt - 1));
            for _ in 0..50 {
                let d = backoff(base, attempt);
                assert!(d >= ceiling / 2 && d <= ceiling, "{attempt}: {d:?}");
            }
        }
    }

    #[test]
    fn offline_cleanup_marks_its_source() {
        let out = clean_offline("um hello hello world");
        assert_eq!(out.text(), "Hello world.");
        assert_eq!(
            out.pieces[0].source,
            PieceSource::RuleBased { because: None }
        );
        assert_eq!(out.fallbacks().count(), 0);
    }

    #[test]
    fn policies_parse() {
        assert_eq!(
            "fallback".parse::<FailurePolicy>(),
            Ok(FailurePolicy::Fallback)
        );
        assert!("ignore".parse::<FailurePolicy>().is_err());
    }
}

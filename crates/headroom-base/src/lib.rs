//! The few things every Headroom crate shares: writes that a crash cannot half-finish
//! ([`fsutil`]), wall-clock stamps for records that outlive the process ([`clock`]), the
//! OpenAI wire protocol's key and error body ([`openai`]), which both the text client and the
//! remote speech backends speak, and the one rule each for processes, outbound HTTP, consent,
//! redaction, locks and the CPU share. Its dependencies are what those rules need and every
//! front end links anyway: reqwest (with rustls) for the one way an outbound client is built
//! ([`http`]), rayon for the CPU share ([`cpu`]), libc for the folder handles ([`fsutil`]);
//! nothing of the speech engines, the GPU, the desktop or the HTTP server.
//!
//! ```
//! use headroom_base::openai::{ApiError, ApiKey};
//!
//! let key = ApiKey::new("sk-secret").unwrap();
//! assert_eq!(format!("{key}"), "<redacted>");
//! let error = ApiError::from_body(r#"{"error":{"message":"Model not loaded"}}"#);
//! assert_eq!(error.message, "Model not loaded");
//! ```
//!
//! | module | for |
//! |---|---|
//! | [`allocator`] | the allocator's set-up, once at the top of `main` |
//! | [`fsutil`] | atomic, durable file writes |
//! | [`fillers`] | the filler words ("um", "uh"): dropped by the cleanup, listened for by the recognizer |
//! | [`input`] | files named for reading opened only when regular, never blocking on a pipe |
//! | [`language`] | the languages narration is translated into, with their espeak-ng voices |
//! | [`clock`] | Unix milliseconds for manifests and reports |
//! | [`job_clock`] | a long job's elapsed time and the estimate of what is left |
//! | [`openai`] | [`openai::ApiKey`] (never printed) and [`openai::ApiError`] (every server's error shape) |
//! | [`redact`] | passwords and keys inside URLs kept out of what is shown ([`redact::SecretUrl`]) |
//! | [`consent`] | what may leave the machine, and where to: one rule for every destination |
//! | [`process`] | programs started with data only on stdin, as option values or after `--` |
//! | [`cpu`] | batch work giving the CPU to interactive work while it runs |
//! | [`http`] | outbound HTTP clients that follow no redirect to another origin |
//! | [`sync`] | a lock whose holder panicked is taken with its value, one rule everywhere |

pub mod allocator;
pub mod clock;
pub mod consent;
pub mod cpu;
pub mod fillers;
pub mod fsutil;
pub mod http;
pub mod input;
pub mod job_clock;
pub mod language;
pub mod openai;
pub mod process;
pub mod redact;
pub mod sync;

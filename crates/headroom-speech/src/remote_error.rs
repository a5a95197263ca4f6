//! What can go wrong talking to a remote speech server. Its own module so the engines' error
//! types (`asr`, `tts`) can carry it without depending on the remote backends themselves.

use crate::audio::AudioError;
use headroom_base::openai::ApiError;
use headroom_base::redact::SecretUrl;

/// Why a remote speech server could not be used; each keeps its cause. URLs are
/// [`SecretUrl`]s, so a password or key inside one never reaches a message; transport causes
/// are kept in words ([`headroom_base::http::describe`]), as reqwest's own name the full URL.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("invalid speech server URL {url}: {source}")]
    InvalidUrl {
        url: SecretUrl,
        #[source]
        source: url::ParseError,
    },
    /// The server answered with a redirect, which is not followed (see
    /// [`headroom_base::http`]).
    #[error("{url}: {redirect}")]
    Redirected {
        url: SecretUrl,
        redirect: headroom_base::http::CrossOriginRedirect,
    },
    /// The server is on another machine that was not allowed: nothing was sent.
    #[error(transparent)]
    NotAllowed(#[from] headroom_base::consent::NotAllowed),
    #[error("remote speech backends are created inside the async runtime")]
    NoRuntime,
    #[error("cannot reach {url}: {message}")]
    Unreachable { url: SecretUrl, message: String },
    #[error("{url} answered HTTP {status}: {}", .error.message)]
    Status {
        url: SecretUrl,
        status: u16,
        error: Box<ApiError>,
    },
    /// The server took longer than the work may (a stalled or overloaded server).
    #[error("{url} gave no answer within {seconds} s")]
    Deadline { url: SecretUrl, seconds: u64 },
    #[error("no audio server was given")]
    NoServer,
    /// The servers named for a job cannot be used as named (too many, pieces per server out
    /// of range or without servers, a model name no server could be asked for).
    #[error("{0}")]
    BadServers(String),
    /// Every server of a fleet was tried for a piece of work, and none did it.
    #[error("no audio server could transcribe {stretch} ({tried} tried); the last: {last}")]
    EveryServerFailed {
        stretch: String,
        tried: usize,
        last: Box<RemoteError>,
    },
    #[error("{url} sent an unreadable answer: {message}")]
    Unreadable { url: SecretUrl, message: String },
    #[error("the audio from {url} cannot be decoded: {source}")]
    BadAudio {
        url: SecretUrl,
        #[source]
        source: AudioError,
    },
}

impl RemoteError {
    /// A request to `url` that failed on the way (refused, timed out, redirected elsewhere).
    pub fn unreachable(url: &url::Url, error: &reqwest::Error) -> RemoteError {
        RemoteError::Unreachable {
            url: SecretUrl::new(url.as_str()),
            message: headroom_base::http::describe(error),
        }
    }

    /// An answer from `url` that broke while it was read.
    pub fn unreadable(url: &url::Url, error: &reqwest::Error) -> RemoteError {
        RemoteError::Unreadable {
            url: SecretUrl::new(url.as_str()),
            message: headroom_base::http::describe(error),
        }
    }
}

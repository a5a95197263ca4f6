//! What can go wrong talking to a remote speech server. Its own module so the engines' error
//! types (`asr`, `tts`) can carry it without depending on the remote backends themselves.

use crate::audio::AudioError;
use headroom_base::openai::ApiError;

/// Why a remote speech server could not be used; each keeps its cause.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("invalid speech server URL {url:?}: {source}")]
    InvalidUrl {
        url: String,
        #[source]
        source: url::ParseError,
    },
    #[error("remote speech backends are created inside the async runtime")]
    NoRuntime,
    #[error("cannot reach {url}: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered HTTP {status}: {}", .error.message)]
    Status {
        url: String,
        status: u16,
        error: Box<ApiError>,
    },
    #[error("{url} sent an unreadable answer: {source}")]
    Unreadable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the audio from {url} cannot be decoded: {source}")]
    BadAudio {
        url: String,
        #[source]
        source: AudioError,
    },
}

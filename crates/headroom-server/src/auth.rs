//! The optional bearer token. With one set (`server.token`, `HEADROOM_SERVE_TOKEN`,
//! `headroom serve --token`), every route but `/health` requires
//! `Authorization: Bearer TOKEN`, as vLLM and llama-server do with `--api-key`, so other users
//! of a shared machine cannot use this user's voices and text model. A missing or wrong token
//! is answered 401 `invalid_api_key`; the comparison takes the same time wherever the first
//! difference is, and the token is never logged or echoed.

use crate::HttpError;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use headroom_core::config::ServeToken;
use headroom_core::metrics::Metrics;
use std::sync::Arc;

/// The routes any local client may call without the token: whether the server is up.
pub const OPEN_PATHS: &[&str] = &["/health"];

/// The token, when one is required.
#[derive(Debug, Clone, Default)]
pub struct TokenGate {
    pub token: Option<ServeToken>,
}

impl TokenGate {
    /// Whether a request for `path` with these headers may pass.
    pub fn allows(&self, path: &str, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        if OPEN_PATHS.contains(&path) {
            return true;
        }
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return false;
        };
        let value = value.as_bytes();
        let Some((scheme, presented)) = value
            .iter()
            .position(|b| *b == b' ')
            .map(|i| (&value[..i], &value[i + 1..]))
        else {
            return false;
        };
        scheme.eq_ignore_ascii_case(b"bearer") && token.matches(presented.trim_ascii())
    }
}

/// The middleware: refuses what [`TokenGate::allows`] does not allow.
pub async fn require_token(
    State((gate, metrics)): State<(Arc<TokenGate>, Arc<Metrics>)>,
    request: Request,
    next: Next,
) -> Response {
    if gate.allows(request.uri().path(), request.headers()) {
        return next.run(request).await;
    }
    metrics.count_connection_refusal(crate::error::INVALID_API_KEY, 1);
    tracing::warn!(
        path = request.uri().path(),
        "refused a request without the server's token"
    );
    HttpError::InvalidApiKey.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = authorization {
            h.insert(header::AUTHORIZATION, a.parse().unwrap());
        }
        h
    }

    #[test]
    fn without_a_token_everything_passes() {
        let gate = TokenGate::default();
        assert!(gate.allows("/v1/models", &headers(None)));
        assert!(gate.allows("/v1/models", &headers(Some("Bearer anything"))));
    }

    #[test]
    fn with_a_token_only_the_token_passes_except_on_health() {
        let gate = TokenGate {
            token: ServeToken::new("s3cret-token"),
        };
        for route in [
            "/v1/chat/completions",
            "/metrics",
            "/v1/headroom/lanes",
            "/",
        ] {
            assert!(!gate.allows(route, &headers(None)), "{route}");
            assert!(gate.allows(route, &headers(Some("Bearer s3cret-token"))));
        }
        assert!(gate.allows("/v1/models", &headers(Some("bearer  s3cret-token "))));
        for wrong in [
            "Bearer s3cret-toke",
            "Bearer s3cret-token2",
            "Bearer S3CRET-TOKEN",
            "Basic s3cret-token",
            "s3cret-token",
            "Bearer",
            "Bearer ",
        ] {
            assert!(!gate.allows("/v1/models", &headers(Some(wrong))), "{wrong}");
        }
        assert!(gate.allows("/health", &headers(None)));
        assert!(!gate.allows("/health/", &headers(None)));
    }

    #[test]
    fn an_empty_token_turns_nothing_on() {
        assert!(ServeToken::new("  ").is_none());
        assert!(ServeToken::new("").is_none());
    }

    #[test]
    fn the_token_is_never_in_debug_output() {
        let gate = TokenGate {
            token: ServeToken::new("s3cret-token"),
        };
        assert!(!format!("{gate:?}").contains("s3cret"));
    }
}

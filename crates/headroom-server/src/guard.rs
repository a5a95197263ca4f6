//! What a web page must not be able to do to a server on loopback. A page can make the user's
//! browser POST to `127.0.0.1` without a CORS preflight (a "simple" request: `text/plain`, a
//! form), and a DNS-rebinding page can make its own host name resolve to `127.0.0.1` and then
//! read the answers. So every request passes three checks before any handler runs:
//! - `Host` must name a loopback host (`localhost`, `127.0.0.0/8`, `[::1]`) with this server's
//!   port, else 421: a rebinding page's requests carry its own host name;
//! - a browser's `Origin` is refused (403) unless the user allowed it
//!   (`server.allowed_origins`, none by default); clients that are not browsers send none;
//! - a request body must be `application/json` or `multipart/form-data` (415 otherwise), which a
//!   page cannot send cross-origin without a preflight.
//!
//! CORS headers are sent only for an allowed origin.

use crate::HttpError;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// The checks' settings: the port this server listens on and the origins the user allowed.
#[derive(Debug, Clone)]
pub struct LoopbackGuard {
    pub port: u16,
    pub allowed_origins: Vec<String>,
}

impl LoopbackGuard {
    /// Whether `host` (a `Host` header) names this server on loopback.
    pub fn host_is_loopback(&self, host: &str) -> bool {
        let (name, port) = match host.rsplit_once(':') {
            // `[::1]:8089`, `127.0.0.1:8089`, `localhost:8089`
            Some((name, port)) if !name.ends_with(':') => (name, port),
            _ => return false,
        };
        if port.parse::<u16>().ok() != Some(self.port) {
            return false;
        }
        let name = name.trim_start_matches('[').trim_end_matches(']');
        name.eq_ignore_ascii_case("localhost")
            || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        self.allowed_origins
            .iter()
            .any(|allowed| allowed.trim_end_matches('/').eq_ignore_ascii_case(origin))
    }

    /// The refusal for a request with these parts, or `None` to let it through.
    pub fn check(&self, method: &Method, headers: &HeaderMap) -> Option<HttpError> {
        let text = |name| {
            headers
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
        };
        let host = text(header::HOST).unwrap_or("");
        if !self.host_is_loopback(host) {
            return Some(HttpError::ForeignHost {
                host: host.to_string(),
            });
        }
        if let Some(origin) = text(header::ORIGIN) {
            if !self.origin_allowed(origin) {
                return Some(HttpError::ForeignOrigin {
                    origin: origin.to_string(),
                });
            }
        }
        let has_body = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        if has_body {
            let content_type = text(header::CONTENT_TYPE).unwrap_or("");
            let essence = content_type
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if essence != "application/json" && essence != "multipart/form-data" {
                return Some(HttpError::UnsupportedMediaType {
                    content_type: content_type.to_string(),
                });
            }
        }
        None
    }
}

/// The middleware: refuses what [`LoopbackGuard::check`] refuses, answers an allowed origin's
/// preflight, and marks an allowed origin's answers with CORS headers.
pub async fn guard(
    State(guard): State<Arc<LoopbackGuard>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(refusal) = guard.check(request.method(), request.headers()) {
        tracing::warn!(error = %refusal, "refused a request from outside this machine's clients");
        return refusal.into_response();
    }
    // Past the check, an `Origin` is one the user allowed.
    let origin = request.headers().get(header::ORIGIN).cloned();
    let mut resp = match (&origin, request.method()) {
        (Some(_), &Method::OPTIONS) => {
            let mut preflight = StatusCode::NO_CONTENT.into_response();
            let h = preflight.headers_mut();
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("authorization, content-type"),
            );
            preflight
        }
        _ => next.run(request).await,
    };
    if let Some(origin) = origin {
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(allowed: &[&str]) -> LoopbackGuard {
        LoopbackGuard {
            port: 8089,
            allowed_origins: allowed.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(name.clone(), value.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_loopback_hosts_with_this_port_are_this_server() {
        let g = guard(&[]);
        for ok in [
            "127.0.0.1:8089",
            "localhost:8089",
            "LOCALHOST:8089",
            "[::1]:8089",
            "127.3.4.5:8089",
        ] {
            assert!(g.host_is_loopback(ok), "{ok}");
        }
        for bad in [
            "attacker.example:8089",
            "127.0.0.1:80",
            "127.0.0.1",
            "localhost",
            "10.0.0.1:8089",
            "",
            "[::1]",
            "0.0.0.0:8089",
        ] {
            assert!(!g.host_is_loopback(bad), "{bad}");
        }
    }

    #[test]
    fn a_web_page_post_is_refused_and_a_client_post_is_not() {
        let g = guard(&[]);
        let host = (header::HOST, "127.0.0.1:8089");
        let csrf = headers(&[
            host.clone(),
            (header::ORIGIN, "http://evil.example"),
            (header::CONTENT_TYPE, "text/plain"),
        ]);
        assert!(matches!(
            g.check(&Method::POST, &csrf),
            Some(HttpError::ForeignOrigin { .. })
        ));
        let plain = headers(&[
            host.clone(),
            (header::CONTENT_TYPE, "text/plain;charset=UTF-8"),
        ]);
        assert!(matches!(
            g.check(&Method::POST, &plain),
            Some(HttpError::UnsupportedMediaType { .. })
        ));
        let client = headers(&[host.clone(), (header::CONTENT_TYPE, "application/json")]);
        assert!(g.check(&Method::POST, &client).is_none());
        let upload = headers(&[
            host,
            (header::CONTENT_TYPE, "multipart/form-data; boundary=x"),
        ]);
        assert!(g.check(&Method::POST, &upload).is_none());
    }

    #[test]
    fn an_allowed_origin_passes() {
        let g = guard(&["http://localhost:5173/"]);
        let h = headers(&[
            (header::HOST, "localhost:8089"),
            (header::ORIGIN, "http://localhost:5173"),
        ]);
        assert!(g.check(&Method::GET, &h).is_none());
    }
}

//! Outbound HTTP. Every client that reaches another server (the text model, cloning servers,
//! remote speech servers) is built by [`client_builder`], which follows a redirect only within
//! the origin it was sent to (scheme, host and port). Consent is given for a destination; a
//! server, or anything answering at its address, that says `307 Location: http://elsewhere/`
//! must not get the transcript re-sent elsewhere. A redirect to another origin fails the
//! request with [`CrossOriginRedirect`], which says where it pointed.

use crate::redact::SecretUrl;

/// Redirects followed within one origin before giving up.
pub const MAX_REDIRECTS: usize = 5;

/// A redirect to another origin, refused.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the server redirected to {to}; Headroom follows no redirect to another server: set that URL directly if you trust it")]
pub struct CrossOriginRedirect {
    /// Where it pointed (shown redacted).
    pub to: SecretUrl,
}

/// Too many redirects within one origin.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the server redirected more than {MAX_REDIRECTS} times")]
pub struct TooManyRedirects;

/// The redirect policy of every outbound client.
pub fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt
            .previous()
            .first()
            .map(|u| u.origin())
            .unwrap_or_else(|| attempt.url().origin());
        if attempt.url().origin() != first {
            let to = SecretUrl::new(attempt.url().as_str());
            attempt.error(CrossOriginRedirect { to })
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(TooManyRedirects)
        } else {
            attempt.follow()
        }
    })
}

/// A client builder with the outbound policy in place; callers add their timeouts.
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().redirect(same_origin_redirects())
}

/// A client with the outbound policy and reqwest's other defaults.
pub fn client() -> reqwest::Client {
    client_builder()
        .build()
        .expect("a client with a custom redirect policy builds")
}

/// A redirect answer that reached the caller unfollowed (a body that cannot be sent twice,
/// such as a streamed upload, is never re-sent): the same refusal, naming where it pointed.
pub fn unfollowed_redirect(response: &reqwest::Response) -> Option<CrossOriginRedirect> {
    if !response.status().is_redirection() {
        return None;
    }
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)?
        .to_str()
        .ok()?;
    let to = response
        .url()
        .join(location)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| location.to_string());
    Some(CrossOriginRedirect {
        to: SecretUrl::new(to),
    })
}

/// The refused redirect behind `err`, if that is why the request failed.
pub fn cross_origin_redirect(err: &reqwest::Error) -> Option<&CrossOriginRedirect> {
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        if let Some(found) = s.downcast_ref::<CrossOriginRedirect>() {
            return Some(found);
        }
        source = s.source();
    }
    None
}

/// A transport error in words for a person: the refused redirect when that is what happened,
/// else the innermost cause; any URL in it redacted. reqwest's own message names the URL,
/// with its password, and says little ("error sending request").
pub fn describe(err: &reqwest::Error) -> String {
    if let Some(redirect) = cross_origin_redirect(err) {
        return redirect.to_string();
    }
    if err.is_timeout() {
        return "timed out".into();
    }
    let mut innermost = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        innermost = s.to_string();
        source = s.source();
    }
    if err.is_connect() && innermost.to_ascii_lowercase().contains("refused") {
        return "connection refused (is the server running?)".into();
    }
    crate::redact::urls(&innermost)
}

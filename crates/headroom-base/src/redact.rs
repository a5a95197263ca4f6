//! Secrets carried inside URLs (`http://user:password@host/`, `?auth=...`) kept out of
//! messages, logs, metrics, health answers and lane history. A URL is used as given; only what
//! is shown passes through [`urls`]: its user information and every query value (any parameter
//! may carry a key, whatever it is named: `auth`, `code`, `x`), shown by name only.

const REDACTED: &str = "<redacted>";

/// A URL that may carry secrets (`http://user:password@host/`, `?api_key=...`). It prints,
/// logs, serializes and compares in errors only redacted; the full text is reached through
/// [`SecretUrl::expose`], which only the code that makes the request calls. Everything that
/// shows, stores or sends a URL as information (messages, project files, headers, metrics)
/// holds one of these rather than a `String`.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct SecretUrl(String);

impl SecretUrl {
    pub fn new(url: impl Into<String>) -> SecretUrl {
        SecretUrl(url.into())
    }

    /// The URL as given, secrets included: for the request only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL as it may be shown.
    pub fn redacted(&self) -> String {
        urls(&self.0)
    }

    /// Whether it carries anything that [`SecretUrl::redacted`] hides.
    pub fn has_secrets(&self) -> bool {
        self.redacted() != self.0
    }
}

impl std::fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretUrl({:?})", self.redacted())
    }
}

/// Serialized redacted: a URL written to a project file, a report or an answer never carries
/// its secrets. (Configuration keeps URLs as the user wrote them, as plain strings.)
impl serde::Serialize for SecretUrl {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.redacted())
    }
}

impl<'de> serde::Deserialize<'de> for SecretUrl {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(SecretUrl)
    }
}

impl From<&str> for SecretUrl {
    fn from(url: &str) -> Self {
        SecretUrl::new(url)
    }
}

impl From<String> for SecretUrl {
    fn from(url: String) -> Self {
        SecretUrl::new(url)
    }
}

/// `text` with the user information and secret query values of every URL in it replaced by
/// `<redacted>`; everything else is kept as it was.
pub fn urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let url_len = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | ')' | ']'))
            .unwrap_or(after.len());
        out.push_str(&redact_one(&after[..url_len]));
        rest = &after[url_len..];
    }
    out.push_str(rest);
    out
}

/// One URL after its `scheme://`.
fn redact_one(url: &str) -> String {
    let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
    let (authority, path) = url.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => format!("{REDACTED}@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    let Some(query_start) = path.find('?') else {
        return authority + path;
    };
    let (path, query) = path.split_at(query_start + 1);
    let (query, fragment) = match query.find('#') {
        // A fragment may carry a token too (`#access_token=...`).
        Some(hash) => (&query[..hash], format!("#{REDACTED}")),
        None => (query, String::new()),
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) => format!("{name}={REDACTED}"),
            None if pair.is_empty() => String::new(),
            // A bare value (`?SEKRIT`) is all value.
            None => REDACTED.to_string(),
        })
        .collect();
    format!("{authority}{path}{}{fragment}", query.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_and_secret_parameters_are_redacted() {
        assert_eq!(
            urls("http://alice:hunter2@gpu.example:8000/v1"),
            "http://<redacted>@gpu.example:8000/v1"
        );
        assert_eq!(
            urls("https://gpu.example/v1?api_key=sk-123&model=qwen#x"),
            "https://gpu.example/v1?api_key=<redacted>&model=<redacted>#<redacted>"
        );
        // Every value, whatever its name: `auth` is no word the old rule knew.
        assert_eq!(
            urls("http://h/v1?auth=SEKRIT7"),
            "http://h/v1?auth=<redacted>"
        );
        assert_eq!(urls("http://h/v1?SEKRIT7"), "http://h/v1?<redacted>");
        assert_eq!(
            urls("error sending request for url (http://u:p@h:1/v1/chat/completions): refused"),
            "error sending request for url (http://<redacted>@h:1/v1/chat/completions): refused"
        );
    }

    #[test]
    fn a_secret_url_shows_serializes_and_debugs_redacted() {
        let url = SecretUrl::new("http://alice:s3cret@host:1/v1?api_key=K&model=m");
        for shown in [
            url.to_string(),
            format!("{url:?}"),
            serde_json::to_string(&url).unwrap(),
            format!("{}", SecretUrl::from("https://u:pw@h/")),
        ] {
            assert!(
                !shown.contains("s3cret") && !shown.contains("=K") && !shown.contains(":pw"),
                "{shown}"
            );
            assert!(shown.contains("<redacted>"), "{shown}");
        }
        assert!(url.has_secrets());
        assert_eq!(
            url.expose(),
            "http://alice:s3cret@host:1/v1?api_key=K&model=m"
        );
        assert!(!SecretUrl::new("http://127.0.0.1:8000/v1").has_secrets());
    }

    #[test]
    fn text_without_secrets_is_unchanged() {
        for text in [
            "http://127.0.0.1:8000/v1",
            "no url here",
            "two: http://a/x and https://b:1/y",
            "mailto-like user@host is not a URL",
        ] {
            assert_eq!(urls(text), text);
        }
    }
}

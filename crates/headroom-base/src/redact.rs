//! Secrets carried inside URLs (`http://user:password@host/`, `?api_key=...`) kept out of
//! messages, logs, health answers and lane history. A URL is used as given; only what is shown
//! passes through [`urls`].

/// Query parameters whose values are secrets, matched case-insensitively by name containing
/// one of these.
const SECRET_PARAMS: [&str; 6] = ["key", "token", "secret", "password", "signature", "sig"];

const REDACTED: &str = "<redacted>";

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
        Some(hash) => query.split_at(hash),
        None => (query, ""),
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if is_secret(name) => format!("{name}={REDACTED}"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{authority}{path}{}{fragment}", query.join("&"))
}

fn is_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_PARAMS.iter().any(|s| name.contains(s))
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
            "https://gpu.example/v1?api_key=<redacted>&model=qwen#x"
        );
        assert_eq!(
            urls("error sending request for url (http://u:p@h:1/v1/chat/completions): refused"),
            "error sending request for url (http://<redacted>@h:1/v1/chat/completions): refused"
        );
    }

    #[test]
    fn text_without_secrets_is_unchanged() {
        for text in [
            "http://127.0.0.1:8000/v1",
            "no url here",
            "two: http://a/x and https://b:1/y?model=m",
            "mailto-like user@host is not a URL",
        ] {
            assert_eq!(urls(text), text);
        }
    }
}

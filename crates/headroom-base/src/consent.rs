//! What may leave the machine, and where to. One rule for every destination Headroom sends
//! data to — the text model, a cloning server, a remote transcription or speech server: a
//! server on this machine (localhost, a loopback address) needs nothing; any other needs the
//! user's consent for its origin (`scheme://host:port`), given in the project (desktop), by
//! `--allow-remote ORIGIN` or `privacy.allow_remote` (CLI, `headroom serve`). Without it the
//! work is refused before a byte is sent, naming what would have gone where.

use crate::redact::SecretUrl;
use std::fmt;

/// What a request carries off the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// Transcript text, narration text, a line to speak.
    Text,
    /// A voice profile's reference clips.
    VoiceClips,
    /// Recorded or imported audio, to be transcribed.
    Audio,
}

impl Payload {
    pub fn describe(self) -> &'static str {
        match self {
            Payload::Text => "text",
            Payload::VoiceClips => "voice clips",
            Payload::Audio => "audio",
        }
    }
}

/// A server something would be sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub url: SecretUrl,
    /// `scheme://host:port`: what consent names. Empty for a URL that does not parse (which
    /// no request can be sent to anyway).
    pub origin: String,
    pub host: String,
    /// Localhost or a loopback address: nothing leaves the machine.
    pub on_this_machine: bool,
}

impl Destination {
    pub fn of(url: &str) -> Destination {
        let parsed = reqwest::Url::parse(url.trim()).ok();
        let on_this_machine = parsed.as_ref().is_some_and(|u| match u.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        });
        Destination {
            url: SecretUrl::new(url.trim()),
            origin: parsed
                .as_ref()
                .map(|u| u.origin().ascii_serialization())
                .filter(|o| o != "null")
                .unwrap_or_default(),
            host: parsed
                .as_ref()
                .and_then(|u| u.host_str().map(str::to_string))
                .unwrap_or_default(),
            on_this_machine,
        }
    }
}

/// The origins of `urls` that are on other machines (what a person's consent names), each
/// once, in the order first named.
pub fn origins_elsewhere<'a>(urls: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut origins: Vec<String> = Vec::new();
    for destination in urls.into_iter().map(Destination::of) {
        if !destination.on_this_machine
            && !destination.origin.is_empty()
            && !origins.contains(&destination.origin)
        {
            origins.push(destination.origin);
        }
    }
    origins
}

/// Which kind of server a destination is, for the refusal's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    TextModel,
    CloningServer,
    SpeechServer,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::TextModel => "text model server",
            Role::CloningServer => "cloning server",
            Role::SpeechServer => "speech server",
        })
    }
}

/// The origins off this machine the user has allowed data to go to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteConsent {
    allowed: Vec<String>,
}

impl RemoteConsent {
    /// Nothing allowed off this machine.
    pub fn none() -> RemoteConsent {
        RemoteConsent::default()
    }

    /// These origins (or URLs, of which only the origin counts) allowed.
    pub fn allowing<I, S>(origins: I) -> RemoteConsent
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut consent = RemoteConsent::none();
        for origin in origins {
            consent.allow(origin.as_ref());
        }
        consent
    }

    /// Allows `origin` (a URL's path and secrets are ignored).
    pub fn allow(&mut self, origin: &str) {
        let origin = Destination::of(origin).origin;
        if !origin.is_empty() && !self.allowed.contains(&origin) {
            self.allowed.push(origin);
        }
    }

    /// Everything either allows.
    pub fn and(mut self, other: &RemoteConsent) -> RemoteConsent {
        for origin in &other.allowed {
            self.allow(origin);
        }
        self
    }

    pub fn permits(&self, destination: &Destination) -> bool {
        destination.on_this_machine || self.allowed.contains(&destination.origin)
    }

    /// Ok when `payloads` may go to the `role` at `url`; else the refusal, naming them.
    pub fn check(&self, role: Role, url: &str, payloads: &[Payload]) -> Result<(), NotAllowed> {
        let destination = Destination::of(url);
        if self.permits(&destination) {
            return Ok(());
        }
        Err(NotAllowed {
            role,
            destination,
            payloads: payloads.to_vec(),
        })
    }
}

/// Data that would have left the machine without consent; nothing was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct NotAllowed {
    pub role: Role,
    pub destination: Destination,
    pub payloads: Vec<Payload>,
}

impl NotAllowed {
    /// "text and voice clips".
    pub fn what(&self) -> String {
        let words: Vec<&str> = self.payloads.iter().map(|p| p.describe()).collect();
        match words.as_slice() {
            [] => "data".into(),
            [one] => one.to_string(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        }
    }
}

impl fmt::Display for NotAllowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the {} at {} is not on this machine, and sending {} there has not been allowed \
             (allow {} for the project, or pass --allow-remote {} / set privacy.allow_remote); \
             nothing was sent",
            self.role,
            self.destination.url,
            self.what(),
            self.destination.origin,
            self.destination.origin,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_needs_nothing_and_elsewhere_needs_its_origin() {
        let none = RemoteConsent::none();
        for local in [
            "http://127.0.0.1:8000/v1",
            "http://localhost:4123",
            "http://[::1]:8020/",
            "http://127.8.9.10/",
        ] {
            assert!(none.check(Role::TextModel, local, &[Payload::Text]).is_ok());
        }
        let refused = none
            .check(
                Role::CloningServer,
                "http://alice:pw@gpu.example:4123/",
                &[Payload::Text, Payload::VoiceClips],
            )
            .unwrap_err();
        let message = refused.to_string();
        assert!(message.contains("cloning server"), "{message}");
        assert!(message.contains("text and voice clips"), "{message}");
        assert!(message.contains("http://gpu.example:4123"), "{message}");
        assert!(!message.contains(":pw@"), "{message}");

        let allowed = RemoteConsent::allowing(["http://gpu.example:4123/anything?key=x"]);
        assert!(allowed
            .check(
                Role::CloningServer,
                "http://gpu.example:4123/v1",
                &[Payload::Audio]
            )
            .is_ok());
        // Another port, scheme or host is another destination.
        for other in [
            "http://gpu.example:4124/",
            "https://gpu.example:4123/",
            "http://gpu.example.evil:4123/",
        ] {
            assert!(allowed
                .check(Role::SpeechServer, other, &[Payload::Audio])
                .is_err());
        }
        assert!(none.check(Role::TextModel, "not a url", &[]).is_err());
    }
}

//! A transcription spread over several OpenAI-compatible audio servers (other machines running
//! `headroom serve`, vLLM serving Whisper, speaches, a LiteLLM proxy in front of any of them).
//!
//! The recording is cut at its pauses ([`pieces_at_pauses`]) and the pieces are sent to the
//! servers at once, as many as they take together, by the same rules as the text lane's
//! upstreams ([`Fleet`]): each server has its own capacity, health and breaker; a piece a
//! server fails (unreachable, a server error, an unreadable answer, no answer before its
//! deadline, busy) moves on to another, and a server that failed is tried again only after a
//! backoff, one piece at a time. Pieces are merged in order, each handed on as a finished
//! window as soon as those before it are, so a killed job goes on after the last piece it
//! kept. Diarization and word timing stay local (the speech service does them on the
//! transcript, as for any engine).

use headroom_base::consent::RemoteConsent;
use headroom_base::job_clock::clock_text;
use headroom_base::openai::ApiKey;
use headroom_core::admission::Lane;
use headroom_core::lanes::{Fleet, Member, NoUpstream, UpstreamResult, UpstreamSpec};
use headroom_core::metrics::Metrics;
use headroom_speech::asr::{
    AsrError, TranscribeOptions, Transcriber, Transcript, WindowDone, SAMPLE_RATE,
};
use headroom_speech::audio::{pieces_at_pauses, PiecePlan, SampleSource};
use headroom_speech::remote::{RemoteError, RemoteTranscriber};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The longest wait between two rounds over the servers (see [`FleetSettings::retry_for`]).
const MAX_ROUND_WAIT: Duration = Duration::from_secs(30);
/// The longest wait for a slot before the servers are looked at again (a down server's
/// backoff may have run out meanwhile).
const RECHECK: Duration = Duration::from_secs(1);

/// The most transcription servers one job names, from every entry alike (the CLI's
/// `--server-url`, the window's batch form, a job record read back).
pub const MAX_SERVERS: usize = 64;
/// The most pieces one server is given at once.
pub const MAX_PER_SERVER: u16 = 64;
/// The longest server URL one job names (a browser's practical limit; a key goes in
/// `HEADROOM_AUDIO_API_KEY`, not in the URL).
pub const MAX_SERVER_URL_CHARS: usize = 2048;
/// The longest model name sent to the servers (vLLM's names a repository: `openai/whisper-large-v3`).
pub const MAX_MODEL_NAME_CHARS: usize = 256;

/// Where a transcription is heard: this machine's engine (no servers), one server (the
/// recording sent as the embedded engine would hear it), or a fleet (cut at pauses, the pieces
/// heard at once). As a person names it, and as a job records it so a resumed job goes on
/// where it started; checked ([`ServerChoice::check`]) once at each entry.
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ServerChoice {
    /// OpenAI-compatible transcription servers (`http://10.0.0.5:8089/v1`); none: this
    /// machine's engine.
    #[serde(default)]
    pub urls: Vec<String>,
    /// Pieces each server is given at once (`None`: one, and one server alone hears the
    /// recording whole rather than in pieces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_server: Option<u16>,
}

/// Redacted, as every URL that may carry a secret is shown.
impl std::fmt::Debug for ServerChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerChoice")
            .field("urls", &self.shown())
            .field("per_server", &self.per_server)
            .finish()
    }
}

/// A server as the fleet tells servers apart: a trailing `/` or spaces make no other server.
fn server_key(url: &str) -> &str {
    url.trim().trim_end_matches('/')
}

impl ServerChoice {
    /// This machine's engine.
    pub fn embedded() -> ServerChoice {
        ServerChoice::default()
    }

    pub fn is_embedded(&self) -> bool {
        self.urls.is_empty()
    }

    /// The recording is cut at its pauses and heard in pieces at once (several servers, or
    /// pieces per server given), not in Whisper-window chunks in order.
    pub fn in_pieces(&self) -> bool {
        self.urls.len() > 1 || (!self.urls.is_empty() && self.per_server.is_some())
    }

    /// Refuses what no job may name: more than [`MAX_SERVERS`] servers, a URL over
    /// [`MAX_SERVER_URL_CHARS`], pieces per server
    /// outside 1..=[`MAX_PER_SERVER`] or without servers, a model name that is empty, over
    /// [`MAX_MODEL_NAME_CHARS`] or holds control characters. The URLs themselves are checked
    /// (and allowed) when the servers are made.
    pub fn check(&self, model: &str) -> Result<(), RemoteError> {
        let refuse = |why: String| Err(RemoteError::BadServers(why));
        if self.urls.len() > MAX_SERVERS {
            return refuse(format!(
                "{} servers were named; one job uses at most {MAX_SERVERS}",
                self.urls.len()
            ));
        }
        if let Some(long) = self
            .urls
            .iter()
            .find(|url| url.chars().count() > MAX_SERVER_URL_CHARS)
        {
            return refuse(format!(
                "a server URL is {} characters; one is at most {MAX_SERVER_URL_CHARS}",
                long.chars().count()
            ));
        }
        match self.per_server {
            Some(_) if self.urls.is_empty() => {
                return refuse(
                    "pieces per server shares pieces among servers: name the servers too".into(),
                )
            }
            Some(n) if !(1..=MAX_PER_SERVER).contains(&n) => {
                return refuse(format!(
                    "pieces per server is {n}; it is 1 to {MAX_PER_SERVER}"
                ))
            }
            _ => {}
        }
        if !self.urls.is_empty() {
            let chars = model.chars().count();
            if chars == 0 || chars > MAX_MODEL_NAME_CHARS || model.chars().any(char::is_control) {
                return refuse(format!(
                    "the model name for the servers must be 1 to {MAX_MODEL_NAME_CHARS} characters, none of them control characters"
                ));
            }
        }
        Ok(())
    }

    /// Refuses a server URL that carries a secret (`user:key@`, a `?key=` parameter), for a
    /// choice that is kept in a file (a job record): the key goes in
    /// `HEADROOM_AUDIO_API_KEY`, which no file holds.
    pub fn check_kept(&self) -> Result<(), RemoteError> {
        match self
            .urls
            .iter()
            .map(|url| headroom_base::redact::SecretUrl::new(url.trim()))
            .find(|url| url.has_secrets())
        {
            Some(url) => Err(RemoteError::BadServers(format!(
                "the server URL {url} carries a secret, which would be kept in the job's record: give the key with HEADROOM_AUDIO_API_KEY instead"
            ))),
            None => Ok(()),
        }
    }

    /// The servers as a record shows them: redacted, spelled as the fleet tells them apart,
    /// sorted (the same servers in another order do the same work), after commas; `None` for
    /// this machine's engine.
    pub fn shown(&self) -> Option<String> {
        let mut shown: Vec<String> = self
            .urls
            .iter()
            .map(|url| headroom_base::redact::SecretUrl::new(server_key(url)).redacted())
            .collect();
        shown.sort();
        shown.dedup();
        (!shown.is_empty()).then(|| shown.join(", "))
    }

    /// The servers' origins on other machines: what a person's consent to send them the audio
    /// names.
    pub fn remote_origins(&self) -> Vec<String> {
        headroom_base::consent::origins_elsewhere(self.urls.iter().map(String::as_str))
    }
}

/// One audio server of the fleet.
pub struct AudioServer {
    transcriber: RemoteTranscriber,
}

impl Member for AudioServer {
    fn shown_url(&self) -> String {
        self.transcriber.shown_url()
    }
}

/// How the fleet shares out the work.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetSettings {
    /// Pieces each server is given at once.
    pub per_server: usize,
    /// How long the pieces are.
    pub pieces: PiecePlan,
    /// A piece's deadline: this, plus [`FleetSettings::deadline_per_second`] for every
    /// second of its audio.
    pub deadline_base: Duration,
    pub deadline_per_second: Duration,
    /// How long a piece keeps going round the servers once every one has failed it (busy,
    /// down, stalled), waiting longer between rounds (1 s, doubling to 30 s); then the piece,
    /// and so its file, fails. A worker restarting, or a router over its rate for a minute,
    /// costs time, not the file.
    pub retry_for: Duration,
}

impl Default for FleetSettings {
    fn default() -> Self {
        FleetSettings {
            per_server: 1,
            pieces: PiecePlan::default(),
            // A CPU server hearing a large model is slower than real time: four seconds for
            // each second of audio, and a minute to start, before it counts as stalled.
            deadline_base: Duration::from_secs(60),
            deadline_per_second: Duration::from_secs(4),
            retry_for: Duration::from_secs(120),
        }
    }
}

/// Several audio servers as one transcriber.
pub struct TranscriptionFleet {
    fleet: Fleet<AudioServer>,
    settings: FleetSettings,
    /// Signalled whenever a piece leaves a server, so one waiting for a slot looks again.
    freed: Notify,
    runtime: Handle,
    name: String,
}

impl TranscriptionFleet {
    /// Servers at `urls` (each like `http://10.0.0.5:8089/v1`), asked for `model`. Audio goes
    /// to each, so every one on another machine must be allowed by `consent`; none is
    /// contacted here.
    pub fn new(
        urls: &[String],
        model: &str,
        api_key: Option<ApiKey>,
        consent: &RemoteConsent,
        settings: FleetSettings,
        metrics: Arc<Metrics>,
    ) -> Result<TranscriptionFleet, RemoteError> {
        let runtime = Handle::try_current().map_err(|_| RemoteError::NoRuntime)?;
        // A server named twice is one server (its capacity is --per-server, not twice that).
        let mut seen = std::collections::HashSet::new();
        let specs = urls
            .iter()
            .filter(|url| seen.insert(server_key(url).to_string()))
            .map(|url| {
                let transcriber = RemoteTranscriber::new(url, model, api_key.clone(), consent)?;
                Ok(UpstreamSpec::new(AudioServer { transcriber }))
            })
            .collect::<Result<Vec<_>, RemoteError>>()?;
        if specs.is_empty() {
            return Err(RemoteError::NoServer);
        }
        let fleet = Fleet::new(Lane::Audio, specs, settings.per_server.max(1), metrics);
        Ok(TranscriptionFleet {
            fleet,
            settings,
            freed: Notify::new(),
            runtime,
            name: model.to_string(),
        })
    }

    /// Pieces the servers take at once, together.
    pub fn capacity(&self) -> usize {
        self.fleet.capacity()
    }

    /// Each server as the lanes panel shows an upstream (up, load, why it is down).
    pub fn views(&self) -> Vec<headroom_core::lanes::UpstreamView> {
        self.fleet.views()
    }

    /// One piece (16 kHz `samples`, at `stretch` seconds of the recording), on whichever server
    /// takes it: another when one fails it, by the fleet's rules.
    pub async fn transcribe_piece(
        &self,
        samples: &[f32],
        stretch: Range<f64>,
        options: &TranscribeOptions,
    ) -> Result<Transcript, RemoteError> {
        let seconds = samples.len() as f64 / SAMPLE_RATE as f64;
        let deadline =
            self.settings.deadline_base + self.settings.deadline_per_second.mul_f64(seconds);
        let mut tried = Vec::new();
        let mut attempts = 0;
        let mut last: Option<RemoteError> = None;
        // Set when every server has failed the piece once.
        let mut give_up_at: Option<tokio::time::Instant> = None;
        let mut round_wait = Duration::from_secs(1);
        loop {
            let freed = self.freed.notified();
            let slot = match self.fleet.pick(&tried) {
                Ok(slot) => slot,
                Err(NoUpstream::Full { .. }) => {
                    let _ = tokio::time::timeout(RECHECK, freed).await;
                    continue;
                }
                Err(NoUpstream::AllTried) => {
                    let now = tokio::time::Instant::now();
                    let give_up = *give_up_at.get_or_insert(now + self.settings.retry_for);
                    if now >= give_up {
                        return Err(RemoteError::EveryServerFailed {
                            stretch: clock(&stretch),
                            tried: attempts,
                            last: Box::new(last.expect("a server was tried")),
                        });
                    }
                    // A backoff of the piece's own: with every server down the fleet gives
                    // a piece to a down one at once, which is no reason to hammer it.
                    tokio::time::sleep(round_wait.min(give_up - now)).await;
                    round_wait = (round_wait * 2).min(MAX_ROUND_WAIT);
                    tried.clear();
                    continue;
                }
            };
            attempts += 1;
            let server = slot.upstream().client();
            let started = tokio::time::Instant::now();
            let answer =
                tokio::time::timeout(deadline, server.transcriber.request(samples, options)).await;
            let error = match answer {
                Ok(Ok(transcript)) => {
                    slot.record(UpstreamResult::Answered, "");
                    slot.first_words(started.elapsed());
                    drop(slot);
                    self.freed.notify_waiters();
                    return Ok(transcript);
                }
                Ok(Err(e)) => e,
                Err(_) => RemoteError::Deadline {
                    url: headroom_base::redact::SecretUrl::new(server.shown_url()),
                    seconds: deadline.as_secs(),
                },
            };
            let result = result_of(&error);
            tracing::warn!(
                server = %server.shown_url(),
                stretch = %clock(&stretch),
                result = result.as_str(),
                "{error}"
            );
            slot.record(result, &error.to_string());
            tried.push(slot.index());
            drop(slot);
            self.freed.notify_waiters();
            if !result.worth_another() {
                return Err(error);
            }
            last = Some(error);
        }
    }
}

/// What a server's error says about it, by the text fleet's rules. In a fleet, a refusal that
/// is about the server rather than the audio (a key it does not take, a model it does not
/// have, its own time or size limit, a redirect) sends the piece to another.
fn result_of(error: &RemoteError) -> UpstreamResult {
    match error {
        RemoteError::Unreachable { .. } | RemoteError::Redirected { .. } => {
            UpstreamResult::Unavailable
        }
        RemoteError::Status {
            status: 429 | 503, ..
        } => UpstreamResult::Busy,
        RemoteError::Status {
            status: 401 | 403 | 404 | 408 | 413,
            ..
        } => UpstreamResult::Unavailable,
        RemoteError::Status { status, .. } if *status >= 500 => UpstreamResult::Unavailable,
        RemoteError::Unreadable { .. } => UpstreamResult::Unreadable,
        RemoteError::Deadline { .. } => UpstreamResult::Deadline,
        // The request itself (a 4xx, the audio refused), or nothing a server said.
        _ => UpstreamResult::Error,
    }
}

/// `12:30–13:45`: a stretch as a person finds it in the recording.
fn clock(stretch: &Range<f64>) -> String {
    format!("{}–{}", clock_text(stretch.start), clock_text(stretch.end))
}

impl Transcriber for TranscriptionFleet {
    fn name(&self) -> &str {
        &self.name
    }

    fn cuts_at_pauses_itself(&self) -> bool {
        true
    }

    /// A model named as Whisper names its English-only ones (`tiny.en`, `whisper-base.en`,
    /// `distil-small.en`) hears English only, so no piece need wait for the first's language.
    fn sole_language(&self) -> Option<&str> {
        self.name.ends_with(".en").then_some("en")
    }

    /// The pieces from `from_secs` on, heard at once on the servers; each is a finished
    /// window once those before it are.
    fn transcribe_from(
        &self,
        samples: &dyn SampleSource,
        from_secs: f64,
        options: &TranscribeOptions,
        window_done: &mut dyn FnMut(WindowDone<'_>),
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError> {
        use futures::StreamExt;
        let rate = SAMPLE_RATE as f64;
        let from = ((from_secs.max(0.0) * rate) as usize).min(samples.len());
        let mut pieces: Vec<Range<usize>> = pieces_at_pauses(samples, &self.settings.pieces)?
            .into_iter()
            .filter(|p| p.end > from)
            .map(|p| p.start.max(from)..p.end)
            .collect();
        if !options.skip_silence {
            // Silence heard too (`--keep-silence`): the same cuts, nothing left out between.
            let mut start = from;
            for piece in &mut pieces {
                piece.start = start;
                start = piece.end;
            }
            match pieces.last_mut() {
                Some(last) => last.end = samples.len(),
                None if from < samples.len() => pieces.push(from..samples.len()),
                None => {}
            }
        }
        let duration = samples.len() as f64 / rate;
        let total: usize = pieces.iter().map(|p| p.len()).sum::<usize>().max(1);
        tracing::info!(
            pieces = pieces.len(),
            servers = self.fleet.len(),
            at_once = self.capacity(),
            "transcribing on the fleet"
        );
        let mut transcript = Transcript {
            speakers: Vec::new(),
            language: options.language.clone(),
            duration,
            segments: Vec::new(),
        };
        let hear = |index: usize, options: TranscribeOptions| {
            let piece = pieces[index].clone();
            async move {
                let audio = samples.read(piece.clone())?;
                let stretch = piece.start as f64 / rate..piece.end as f64 / rate;
                let mut heard = self
                    .transcribe_piece(&audio, stretch.clone(), &options)
                    .await?;
                for segment in &mut heard.segments {
                    segment.shift(stretch.start);
                }
                Ok::<_, AsrError>((index, heard))
            }
        };
        let mut done = 0;
        let all = async {
            let mut waiting = std::collections::BTreeMap::new();
            let mut options = options.clone();
            if options.language.is_none() {
                options.language = self.sole_language().map(str::to_string);
            }
            let mut first_index = 0;
            // A language not given is the first piece's: heard first, alone, it is then sent
            // with every other, as the embedded engine detects it once (pieces heard apart
            // could each take another).
            if options.language.is_none() && !pieces.is_empty() {
                let (index, heard) = hear(0, options.clone()).await?;
                options.language = heard.language.clone();
                waiting.insert(index, heard);
                first_index = 1;
            }
            // As many pieces in flight as the servers take, whichever finishes first making
            // room for the next (in order, a slow piece would hold its finished followers'
            // places); finished pieces wait, as text, for those before them to be handed on.
            let heard = futures::stream::iter(first_index..pieces.len())
                .map(|index| hear(index, options.clone()))
                .buffer_unordered(self.capacity().max(1));
            futures::pin_mut!(heard);
            let mut next_index = 0;
            loop {
                while let Some(heard) = waiting.remove(&next_index) {
                    done += pieces[next_index].len();
                    progress(done as f32 / total as f32);
                    let kept = transcript.segments.len();
                    transcript.segments.extend(heard.segments);
                    if transcript.language.is_none() {
                        transcript.language = heard.language;
                    }
                    window_done(WindowDone {
                        segments: &transcript.segments[kept..],
                        done_secs: pieces[next_index].end as f64 / rate,
                        duration_secs: duration,
                    });
                    next_index += 1;
                }
                match heard.next().await {
                    Some(finished) => {
                        let (index, heard) = finished?;
                        waiting.insert(index, heard);
                    }
                    None => break,
                }
            }
            Ok::<_, AsrError>(())
        };
        self.runtime.block_on(async {
            tokio::select! {
                r = all => r,
                _ = cancel.cancelled() => Err(AsrError::Cancelled),
            }
        })?;
        Ok(transcript)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(urls: &[&str], per_server: Option<u16>) -> ServerChoice {
        ServerChoice {
            urls: urls.iter().map(|u| u.to_string()).collect(),
            per_server,
        }
    }

    fn refusal(choice: &ServerChoice, model: &str) -> String {
        match choice.check(model) {
            Err(RemoteError::BadServers(why)) => why,
            other => panic!("refused as bad servers, not {other:?}"),
        }
    }

    #[test]
    fn a_choice_no_job_may_name_is_refused_with_why() {
        let many: Vec<String> = (0..=MAX_SERVERS)
            .map(|i| format!("http://127.0.0.1:{}/v1", 9000 + i))
            .collect();
        let too_many = ServerChoice {
            urls: many,
            per_server: None,
        };
        assert!(refusal(&too_many, "whisper-1").contains("at most 64"));
        let long = format!("http://a:1/{}", "v".repeat(MAX_SERVER_URL_CHARS));
        assert!(refusal(&on(&[&long], None), "whisper-1").contains("at most 2048"));
        assert!(refusal(&on(&[], Some(2)), "whisper-1").contains("name the servers"));
        assert!(refusal(&on(&["http://a:1/v1"], Some(0)), "whisper-1").contains("1 to 64"));
        assert!(refusal(&on(&["http://a:1/v1"], Some(65)), "whisper-1").contains("1 to 64"));
        for model in ["", "whisper\n-1", &"m".repeat(MAX_MODEL_NAME_CHARS + 1)] {
            assert!(refusal(&on(&["http://a:1/v1"], None), model).contains("model name"));
        }
        // Within every bound; this machine's engine names no server model.
        on(&["http://a:1/v1"], Some(MAX_PER_SERVER))
            .check("openai/whisper-large-v3")
            .unwrap();
        ServerChoice::embedded().check("").unwrap();
    }

    #[test]
    fn pieces_are_heard_at_once_with_several_servers_or_pieces_per_server_given() {
        assert!(!ServerChoice::embedded().in_pieces());
        assert!(!on(&["http://a:1/v1"], None).in_pieces());
        assert!(on(&["http://a:1/v1"], Some(1)).in_pieces());
        assert!(on(&["http://a:1/v1", "http://b:1/v1"], None).in_pieces());
    }

    #[test]
    fn servers_are_shown_redacted_and_sorted_and_only_those_elsewhere_need_consent() {
        let choice = on(
            &[
                "http://b.example:8000/v1/",
                "http://user:hunter2@a.example:8000/v1",
                "http://127.0.0.1:8089/v1",
                "http://b.example:8000/v1",
            ],
            None,
        );
        let shown = choice.shown().unwrap();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(shown.matches("b.example").count(), 1, "{shown}");
        let mut reversed = choice.clone();
        reversed.urls.reverse();
        assert_eq!(
            reversed.shown().unwrap(),
            shown,
            "the same servers in another order"
        );
        assert_eq!(
            choice.remote_origins(),
            ["http://b.example:8000", "http://a.example:8000"]
        );
        assert_eq!(ServerChoice::embedded().shown(), None);
        assert!(!format!("{choice:?}").contains("hunter2"));
    }

    #[test]
    fn a_choice_kept_in_a_record_carries_no_secret() {
        let with_key = on(&["http://127.0.0.1:8089/v1?api_key=hunter2"], None);
        let why = match with_key.check_kept() {
            Err(RemoteError::BadServers(why)) => why,
            other => panic!("refused, not {other:?}"),
        };
        assert!(why.contains("HEADROOM_AUDIO_API_KEY"), "{why}");
        assert!(!why.contains("hunter2"), "{why}");
        assert!(on(&["http://u:hunter2@10.0.0.5:8089/v1"], None)
            .check_kept()
            .is_err());
        on(&["http://10.0.0.5:8089/v1"], Some(2))
            .check_kept()
            .unwrap();
    }
}

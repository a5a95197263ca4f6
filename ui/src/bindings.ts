// Generated from the Rust definitions by src-tauri/bindings.rs: do not edit.
// Regenerate with `HEADROOM_WRITE_BINDINGS=1 cargo test -p headroom-desktop bindings`.

export type Lane = "audio" | "text";
export type RejectReason = "text_lane_full" | "audio_lane_full" | "input_too_long" | "deadline_exceeded" | "upstream_unavailable" | "upstream_busy" | "upstream_error" | "unusable_reply" | "audio_priority" | "gpu_memory_pressure" | "remote_not_allowed" | "cancelled";
export type DeadlineKind = "queue_wait" | "first_chunk" | "total";
export type SuggestedAction = { "action": "retry_after", after_ms: number, } | { "action": "use_rule_based_cleanup" } | { "action": "split_input" } | { "action": "check_server" };
export type Rejection = { reason: RejectReason, lane: Lane, 
/**
 * Requests running in the lane when this was decided.
 */
in_flight: number, 
/**
 * The lane's concurrency limit.
 */
limit: number, 
/**
 * Requests waiting in the lane's queue when this was decided.
 */
waiting: number, 
/**
 * The lane's wait-queue bound.
 */
wait_limit: number, 
/**
 * 1-based place in the wait queue, when the request had one.
 */
position: number | null, 
/**
 * When a retry has a fair chance, estimated from recent latencies.
 */
retry_after_ms: number | null, 
/**
 * Which deadline passed, for `deadline_exceeded`.
 */
deadline: DeadlineKind | null, 
/**
 * The specific facts behind the reason (sizes, limits, the server's own words).
 */
detail: string | null, 
/**
 * True when some output had already been delivered before the failure.
 */
after_output: boolean, };
export type Occupancy = { in_flight: number, limit: number, waiting: number, wait_limit: number, 
/**
 * Slots beyond `limit` that only interactive work may take (so `in_flight` may exceed
 * `limit` by this much).
 */
reserved: number, };
export type RejectionRecord = { at_unix_ms: number, rejection: Rejection, };
export type UpstreamView = { name: string, up: boolean, in_flight: number, capacity: number, context_tokens: number | null, 
/**
 * Running average of its recent first-token times.
 */
recent_ttft_ms: number | null, down_for_ms: number | null, 
/**
 * When a down upstream gets its next request (or health check).
 */
retry_in_ms: number | null, down_reason: string | null, };
export type LaneSnapshot = { lane: Lane, occupancy: Occupancy, admitted_total: number, rejected_total: { [key in RejectReason]?: number }, recent_rejections: Array<RejectionRecord>, median_latency_ms: number | null, 
/**
 * A text lane's upstreams, each with its own slots and health (empty for the audio lane).
 */
upstreams: Array<UpstreamView>, };
export type SignalSeverity = "warning" | "critical";
export type SignalUnit = "percent" | "factor" | "seconds" | "count" | "bytes_per_hour" | "hidden";
export type CrossedSignal = { 
/**
 * The signal's stable name (`cleanup_fallback_rate`): the UI translates by it.
 */
code: string, 
/**
 * The Prometheus alert for the same signal.
 */
alert: string, severity: SignalSeverity, 
/**
 * The group it is about: `project`, `upstream`, `reason` or `kind`; empty for the lane.
 */
labels: { [key in string]: string }, value: number, threshold: number, 
/**
 * Since when the threshold has been crossed without a break.
 */
since_unix_ms: number, 
/**
 * How `value` reads (the window words it in its language from these, the code and the
 * labels).
 */
unit: SignalUnit, 
/**
 * The window the value is measured over, and how long it has to hold, in minutes.
 */
window_mins: number, for_mins: number, 
/**
 * "40% of project interview's segments fell back to the rules in the last 10 min: the
 * text lane is undersized for this project's work — add an upstream ..."
 */
message_en: string, };
export type LaneView = { server_url: string | null, 
/**
 * The audio lane's: who has the CPU, batch work paused for interactive work, and the
 * interactive jobs that ran beside batch work.
 */
cpu: CpuShareView | null, 
/**
 * On the configured text lane's view: the signals crossed now (a policy to change).
 */
signals: Array<CrossedSignal>, lane: Lane, occupancy: Occupancy, admitted_total: number, rejected_total: { [key in RejectReason]?: number }, recent_rejections: Array<RejectionRecord>, median_latency_ms: number | null, 
/**
 * A text lane's upstreams, each with its own slots and health (empty for the audio lane).
 */
upstreams: Array<UpstreamView>, };
export type YieldRule = "none" | "gate" | "preempt";
export type BatchWorkView = { 
/**
 * What the work is, e.g. `transcription`, `speech`, `voice match`.
 */
work: string, jobs: number, 
/**
 * Jobs of it paused now, giving way to interactive work.
 */
paused: number, };
export type BesideView = { 
/**
 * The interactive job, e.g. `speech`, `transcription`.
 */
job: string, 
/**
 * The batch work running beside it.
 */
beside: Array<string>, 
/**
 * When it ended, Unix milliseconds.
 */
at_unix_ms: number, took_ms: number, };
export type PausedTotal = { work: string, paused_secs: number, };
export type CpuShareView = { 
/**
 * Whether batch work gives way (`audio_lane.batch_gives_way`).
 */
batch_gives_way: boolean, interactive_running: number, batch: Array<BatchWorkView>, paused_total: Array<PausedTotal>, 
/**
 * The last interactive jobs that ran beside batch work, newest first.
 */
recent_beside: Array<BesideView>, };
export type JobTime = { 
/**
 * Since the job started.
 */
elapsed_secs: number, 
/**
 * About how long until it is done; `None` until the job has shown its pace.
 */
remaining_secs: number | null, };
export type CleanupMode = "cleanup" | "rewrite";
export type FailurePolicy = "reject" | "fallback" | "retry";
export type PieceSource = { "kind": "llm", attempts: number, } | { "kind": "rule_based", because: Rejection | null, } | { "kind": "unchanged" };
export type CleanupEvent = { "event": "planned", chunks: number, } | { "event": "chunk_started", index: number, attempt: number, } | { "event": "delta", index: number, text: string, } | { "event": "retrying", index: number, attempt: number, wait_ms: number, rejection: Rejection, } | { "event": "chunk_finished", index: number, source: PieceSource, };
export type Decision = "pending" | "accepted" | "rejected";
export type SuggestionSource = "llm" | "rule_based";
export type TextNote = { "kind": "rule_based", reasons: Array<RejectReason>, } | { "kind": "not_translated", reasons: Array<RejectReason>, } | { "kind": "rules_instead_of_rewrite" };
export type Suggestion = { text: string, source: SuggestionSource, 
/**
 * Why the rule-based cleanup was used, when a rejection caused it.
 */
note?: string | null, 
/**
 * The same, as a code.
 */
note_code?: TextNote | null, decision: Decision, };
export type ProjectWord = { start: number, end: number, text: string, };
export type ProjectSegment = { start: number, end: number, 
/**
 * The transcribed text, as the user edited it.
 */
text: string, suggestion?: Suggestion | null, 
/**
 * Who speaks (a [`Speaker::id`] of the project's speakers), once speakers were found.
 */
speaker?: string | null, 
/**
 * The words with their times, as transcribed (kept for splitting the segment at a word
 * and for exports); dropped when the text is edited, as they no longer say it.
 */
words?: Array<ProjectWord>, };
export type Speaker = { 
/**
 * The label segments and words carry: `S1`, `S2`, … in order of first speech, stable
 * within the transcript.
 */
id: string, 
/**
 * The name shown: a voice profile's for a recognised speaker, or one the user gave.
 */
name?: string | null, 
/**
 * The voice profile this speaker was recognised as, or attached to by the user.
 */
profile?: string | null, 
/**
 * How close this speaker's voice is to that profile (cosine similarity), when the
 * speaker was recognised by voice.
 */
similarity?: number | null, 
/**
 * Seconds this speaker speaks.
 */
seconds: number, };
export type SpeechTake = { 
/**
 * Relative to the project folder.
 */
file: string, voice: string | null, 
/**
 * The segment spoken, or `None` for the whole transcript.
 */
segment: number | null, duration_secs: number, created_unix_ms: number, 
/**
 * For a take in a voice profile: how it was made ("voice match (approximate)", "cloned
 * by ...") and how close it is to the voice, beside the default voice: by the embedder
 * the voice match searched against, and by the independent one (Resemblyzer's, `None`
 * when it is not installed), which the search never used.
 */
voice_method: string | null, similarity: number | null, default_similarity: number | null, similarity_independent: number | null, default_similarity_independent: number | null, };
export type ProjectSettings = { 
/**
 * Send the transcript to the text model; when off, only the rule-based cleanup runs and no
 * request leaves the machine.
 */
llm_cleanup: boolean, 
/**
 * What happens when the text lane refuses a cleanup.
 */
failure_policy: FailurePolicy, cleanup_mode: CleanupMode, 
/**
 * The text model's server for this project; `None` uses the app's setting.
 */
server_url: string | null, 
/**
 * More servers beside `server_url` behind this project's text lane (each with its own
 * slots, health and breaker); only with a `server_url` of the project's own.
 */
upstreams: Array<string>, 
/**
 * The servers on other machines (their origins, e.g. `https://gpu.example:8000`) this
 * project's transcript may be sent to, by the user's explicit consent: each upstream of
 * its text lane off this machine needs its own. Servers on this machine need none. (A
 * project saved with one origin reads as a list of that one.)
 */
remote_text_allowed: Array<string>, 
/**
 * The transcription servers on other machines (their origins) this project's recording
 * may be sent to, by the user's explicit consent (given when a batch sent to servers made
 * the project); servers on this machine need none.
 */
remote_audio_allowed: Array<string>, 
/**
 * The one cloning server on another machine (its origin) this project's text and voice
 * clips may be sent to, by the user's explicit consent; servers on this machine need
 * none. A different server elsewhere needs consent again.
 */
remote_voice_allowed: string | null, 
/**
 * The synthesis voice (an espeak-ng voice id, or `joe` for the Piper voice); `None` is the
 * engine's default.
 */
voice: string | null, 
/**
 * Whether transcribing finds who speaks when (`off`, `auto`, or how many speakers).
 */
speakers: string, 
/**
 * Whether transcribing writes the fillers ("um", "uh") Whisper hears but leaves out of its
 * text, so that editing by the words can cut them (each window read twice: about half as
 * long again).
 */
hear_fillers: boolean, };
export type Project = { format: number, 
/**
 * The folder's name; stable handle for the UI.
 */
id: string, name: string, created_unix_ms: number, modified_unix_ms: number, settings: ProjectSettings, 
/**
 * The audio the transcript came from, relative to the project folder.
 */
source_audio: string | null, language: string | null, duration_secs: number, segments: Array<ProjectSegment>, 
/**
 * Who speaks in the transcript, when speakers were found; segments name them by id.
 */
speakers?: Array<Speaker>, speech: Array<SpeechTake>, 
/**
 * The project's narration (see `crate::narration`), once one was started.
 */
narration?: Narration | null, 
/**
 * The edit of the recording by its words (see the `editing` module): what was asked and the
 * stretches of the original kept. The original is never changed.
 */
edit?: RecordingEdit | null, };
export type ProjectEntry = { "state": "ok", id: string, name: string, modified_unix_ms: number, segments: number, } | { "state": "unreadable", id: string, error: string, };
export type TextDestination = { 
/**
 * The server's URL, without user information or secret parameters.
 */
url: string, host: string, 
/**
 * `scheme://host:port`: what the project's consent names.
 */
origin: string, 
/**
 * Every origin off this machine the data would go to (each upstream of a text lane
 * elsewhere): the project's consent names each of them.
 */
origins: Array<string>, 
/**
 * Localhost or a loopback address: the text does not leave the machine.
 */
on_this_machine: boolean, 
/**
 * On this machine, or another the project allowed.
 */
allowed: boolean, };
export type VersionInfo = { id: string, saved_unix_ms: number, reason: string, segments: number, };
export type SplitAt = { "at": "word", index: number, } | { "at": "time", secs: number, };
export type SegmentSaved = { index: number, segment: ProjectSegment, modified_unix_ms: number, };
export type KeptRange = { start: number, end: number, 
/**
 * A shortened pause that sounds as the recording's room tone (its quietest stretch)
 * instead of its own audio; its times are still the pause's, which a video editor shows.
 */
room_tone?: boolean, };
export type EditList = { kept: Array<KeptRange>, 
/**
 * Where the room tone comes from (the recording's quietest stretch), when a kept range
 * asks for it.
 */
room_tone?: KeptRange | null, };
export type TimeSpan = { start: number, end: number, };
export type EditIntent = { 
/**
 * Cut every filler, repeat and false start the cleanup rules find.
 */
cut_fillers: boolean, 
/**
 * Shorten pauses longer than this many seconds to it.
 */
max_pause: number | null, 
/**
 * Shortened pauses sound as the recording's room tone instead of their own audio.
 */
room_tone: boolean, 
/**
 * Passages cut by hand. A word goes when its middle (where the edit places it, in the
 * recording's pauses) is inside one.
 */
cuts: Array<TimeSpan>, 
/**
 * Words cut by hand, each by a time inside it as transcribed (the transcript's own word
 * times, which splitting a segment or placing the words does not move).
 */
struck_words: Array<number>, 
/**
 * Words kept whatever else would cut them, each by a time inside it as transcribed.
 */
kept_words: Array<number>, };
export type RecordingEdit = { intent: EditIntent, list: EditList, 
/**
 * The transcript's words (in order) as the edit placed them: their recognized times
 * moved to the pauses heard in the recording.
 */
word_times: Array<TimeSpan>, 
/**
 * The original as it was decoded for the edit: its length and rate.
 */
source_secs: number, sample_rate: number, made_unix_ms: number, };
export type WordRef = { id: string, segment: number, word: number, text: string, start: number, end: number, };
export type FoundFiller = { word: WordRef, kind: string, cut: boolean, };
export type EditSummary = { edit: RecordingEdit | null, fillers: Array<FoundFiller>, original_secs: number, edited_secs: number, 
/**
 * Words the edit leaves out.
 */
words_cut: number, 
/**
 * Their ids, in order (`SEGMENT:WORD`).
 */
cut_ids: Array<string>, 
/**
 * When the project was saved, as its `modified_unix_ms` says.
 */
modified_unix_ms: number, 
/**
 * Joins between stretches kept.
 */
joins: number, };
export type EditChange = { 
/**
 * Cut the fillers (true) or stop cutting them (false).
 */
cut_fillers: boolean | null, 
/**
 * Shorten pauses to this many seconds; 0 stops shortening.
 */
max_pause: number | null, room_tone: boolean | null, 
/**
 * Passages to cut.
 */
cuts: Array<TimeSpan>, 
/**
 * Words to cut, by id (`SEGMENT:WORD`) or a run of them (`FIRST-LAST`, both ends cut).
 * A word struck is no longer kept.
 */
strike: Array<string>, 
/**
 * Words to keep whatever else would cut them, by id or run as `strike`; a word struck
 * by hand is no longer struck.
 */
keep: Array<string>, 
/**
 * Start again from the whole recording (alone: remove the edit).
 */
clear: boolean, 
/**
 * Start from this intent instead of the project's (the window's undo and redo); it is
 * held to the same bounds as any other.
 */
from?: EditIntent, };
export type NarrationMode = "cleanup" | "rewrite" | "translate";
export type NarrationOptions = { mode: NarrationMode | null, 
/**
 * The language to translate into (a code such as `es`, or its English name).
 */
to: string | null, 
/**
 * A voice as projects name them (`profile:<id>`, `kokoro-<style>`, an espeak-ng voice).
 */
voice: string | null, policy: FailurePolicy | null, 
/**
 * Also mix the narration over the original audio, ducking the original.
 */
mix: boolean | null, 
/**
 * The voice each speaker (by id) is spoken in, as projects name voices; an empty voice
 * takes the speaker's default again. Speakers left out keep the last narration's choice.
 */
speaker_voices: { [key in string]: string } | null, };
export type NarrationSettings = { mode: NarrationMode, 
/**
 * The narration's language (the code); the source's when not translating.
 */
language: string, voice: string | null, policy: FailurePolicy, mix: boolean, 
/**
 * The text model was used (the project's LLM cleanup was on); otherwise the rules only.
 */
llm: boolean, 
/**
 * The voices the user chose for speakers (by id); the others get their default (see
 * [`SpeakerVoice`]).
 */
speaker_voices?: { [key in string]: string }, };
export type NarrationStage = "text" | "speech";
export type SegmentRefusal = { stage: NarrationStage, 
/**
 * A rejection's reason code (`text_lane_full`, ...), or `failed`.
 */
reason: string, message: string, };
export type NarrationTake = { 
/**
 * The WAV, relative to the project folder.
 */
file: string, 
/**
 * The text it speaks and the voice it speaks in (as the run asked for it).
 */
text: string, voice: string | null, 
/**
 * The engine voice that spoke it, and how (a voice profile's method).
 */
spoken_by: string, 
/**
 * The take's sound before fitting, the rate it was fitted at, and how long it lasts now.
 */
natural_secs: number, rate: number, secs: number, 
/**
 * How far past its segment's end it runs after fitting, and how much was cut where the next
 * segment starts.
 */
overflow_secs: number, cut_secs: number, };
export type NarratedSegment = { start: number, end: number, 
/**
 * The segment text it was made from, and the text stage's task then.
 */
source_text: string, task: string, 
/**
 * The narration text, where the text stage finished.
 */
text: string | null, text_source: SuggestionSource | null, 
/**
 * The text's language (the source's, when a translation fell back to the rules).
 */
language: string | null, 
/**
 * Why the rules were used, or why the text is not translated.
 */
note: string | null, 
/**
 * The same, as a code.
 */
note_code?: TextNote | null, refused: SegmentRefusal | null, take: NarrationTake | null, };
export type SegmentState = { "state": "waiting" } | { "state": "text_refused", reason: string, message: string, } | { "state": "text_done" } | { "state": "speech_refused", reason: string, message: string, } | { "state": "synthesized" } | { "state": "fitted" } | { "state": "overflow", secs: number, cut_secs: number, };
export type NarrationOutput = { wav: string, mix: string | null, srt: string, vtt: string, duration_secs: number, language: string, created_unix_ms: number, };
export type Narration = { settings: NarrationSettings, segments: Array<NarratedSegment>, output: NarrationOutput | null, 
/**
 * Why the voice differs from the one asked for (the voice speaks English only).
 */
voice_note: string | null, 
/**
 * The same, as a code.
 */
voice_note_code?: VoiceNote | null, };
export type SpeakerVoiceSource = "chosen" | "profile" | "default";
export type SpeakerVoice = { speaker: string, 
/**
 * The speaker's name as shown.
 */
name: string, 
/**
 * As projects name voices (`profile:<id>`, `kokoro-<style>`, an espeak-ng voice).
 */
voice: string, source: SpeakerVoiceSource, };
export type VoiceNote = { "kind": "speaks_english_only", voice: string, language: string, instead: string, };
export type RefusedNarration = { segment: number, stage: NarrationStage, 
/**
 * A rejection's reason code (`text_lane_full`, ...), or `failed`.
 */
reason: string, message: string, };
export type Overflowed = { segment: number, secs: number, cut_secs: number, };
export type NarrationTimings = { total_secs: number, 
/**
 * Text requests (or the rules), summed.
 */
text_secs: number, 
/**
 * Takes on the audio lane, waiting included, summed.
 */
speech_secs: number, 
/**
 * Fitting the takes to their slots, summed.
 */
fit_secs: number, 
/**
 * Laying out the WAV, the mix and the subtitles.
 */
assemble_secs: number, };
export type NarrationSummary = { job: string, settings: NarrationSettings, segments: number, 
/**
 * Segments with a take now.
 */
narrated: number, 
/**
 * Segments this run worked on; the others were unchanged since the last run.
 */
worked_on: number, unchanged: number, refused: Array<RefusedNarration>, overflowed: Array<Overflowed>, output: NarrationOutput | null, voice_note: string | null, voice_note_code: VoiceNote | null, timings: NarrationTimings, };
export type NarrationView = { narration: Narration | null, states: Array<SegmentState>, 
/**
 * The project's text model is on (cleanup and rewrite use it; translation needs it).
 */
llm: boolean, 
/**
 * Each speaker's voice in the next run (none when the transcript has no speakers).
 */
speakers: Array<SpeakerVoice>, };
export type LanguageView = { code: string, name: string, };
export type Waveform = { duration_secs: number, peaks: Array<number>, };
export type JobInfo = { id: string, project: string, project_name: string, 
/**
 * `transcribe`, `cleanup`, `synthesize` or `narrate`.
 */
kind: string, description: string, fraction: number, created_unix_ms: number, updated_unix_ms: number, 
/**
 * A process is running it now; otherwise it was paused or interrupted.
 */
running: boolean, 
/**
 * Stopped by a person's Pause (not by a crash or a kill).
 */
paused: boolean, };
export type RefusedSegment = { segment: number, reason: string, };
export type SegmentOutcome = { "outcome": "cleaned", segment: number, suggestion: Suggestion, } | { "outcome": "refused", segment: number, rejection: Rejection, } | { "outcome": "skipped", segment: number, reason: string, };
export type CleanupSummary = { job: string, segments: number, 
/**
 * Every segment refused in the job, resumed runs included.
 */
refused: Array<RefusedSegment>, 
/**
 * This run's segments.
 */
outcomes: Array<SegmentOutcome>, };
export type JobOutcome = { "kind": "transcribed", "result": Project } | { "kind": "cleaned", "result": CleanupSummary } | { "kind": "synthesized", "result": SpeechTake } | { "kind": "narrated", "result": NarrationSummary };
export type BatchServers = { 
/**
 * The person allows the recordings to go to those of the servers that are on other
 * machines: each project made records it as its own consent (a resumed job goes on
 * there). Without it a server elsewhere refuses the batch before anything is sent.
 */
allow_remote: boolean, 
/**
 * OpenAI-compatible transcription servers (`http://10.0.0.5:8089/v1`); none: this
 * machine's engine.
 */
urls: Array<string>, 
/**
 * Pieces each server is given at once (`None`: one, and one server alone hears the
 * recording whole rather than in pieces).
 */
per_server?: number | null, };
export type Config = { llm: LlmSettings, text_lane: TextLaneSettings, audio_lane: AudioLaneSettings, cleanup: CleanupSettings, server: ServerSettings, cloning: CloningSettings, privacy: PrivacySettings, };
export type UpstreamSettings = { url: string, capacity: number | null, };
export type LlmSettings = { 
/**
 * Base URL of an OpenAI-compatible server, ending in `/v1`.
 */
url: string, 
/**
 * Model name; the server's first model when unset.
 */
model: string | null, 
/**
 * Bearer key. Prefer the `HEADROOM_API_KEY` environment variable.
 */
api_key: string | null, 
/**
 * Requests `url` is given at once, for a router or a server that does not say (vLLM);
 * unset: `text_lane.max_in_flight`. Never more than the slots the server says it has.
 */
capacity: number | null, 
/**
 * More servers behind the same text lane, beside `url`: each has its own slots, health
 * and breaker, and a request goes to one with a free slot.
 */
upstreams: Array<UpstreamSettings>, };
export type TextLaneSettings = { max_in_flight: number, max_waiting: number, context_tokens: number | null, max_input_chars: number, max_tokens: number, queue_wait_secs: number, first_chunk_secs: number, total_secs: number, 
/**
 * While interactive audio runs: none, gate (no new text requests) or preempt (also stop
 * running ones).
 */
yield_to_audio: YieldRule, 
/**
 * With an NVIDIA GPU: free device memory (MiB) kept for audio; below it new text work is
 * refused with `gpu_memory_pressure`. Unset or 0: no GPU gate.
 */
audio_headroom_mib: number | null, };
export type AudioLaneSettings = { 
/**
 * Heavy audio jobs at once.
 */
max_in_flight: number, 
/**
 * Further slots only interactive work may take, beside running batch work.
 */
interactive_reserve: number, 
/**
 * Places in the lane the later sentences of streamed speech hold at once, all streams
 * together; other streams wait their turn outside the queue, which stays for requests a
 * person is waiting on.
 */
stream_places: number, max_waiting: number, queue_wait_secs: number, 
/**
 * Speech models (Whisper, voices, VAD, embedder) unused this long are let go, and loaded
 * again when next needed; 0 keeps them until memory is freed by hand.
 */
model_idle_secs: number, 
/**
 * Batch audio work (uploads at batch priority, narration, voice match searches, cloning
 * takes) gives the CPU to interactive work while both run. Off only to compare.
 */
batch_gives_way: boolean, };
export type CleanupSettings = { mode: CleanupMode, policy: FailurePolicy, retry_attempts: number, };
export type ServerSettings = { 
/**
 * Loopback address only.
 */
listen: string, 
/**
 * Largest chat request body accepted.
 */
max_body_bytes: number, 
/**
 * Largest audio upload accepted for transcription.
 */
max_upload_bytes: number, 
/**
 * Uploads received at once; more are refused at once (each is written to a temporary
 * file as it arrives, so this bounds open files and disk writes, not memory).
 */
max_concurrent_uploads: number, 
/**
 * Browser origins (e.g. `http://localhost:5173`) allowed to call the server; requests
 * from any other web page are refused. None by default.
 */
allowed_origins: Array<string>, 
/**
 * Connections open at once; one more is answered 503 `too_many_connections` and closed.
 */
max_connections: number, 
/**
 * A client must send a request's headers within this many seconds, and its body at no
 * less than `min_read_bytes_per_sec` over each window this long; else it is dropped and
 * whatever it held (an upload slot, body memory, its connection) is freed.
 */
read_timeout_secs: number, 
/**
 * The slowest body accepted, in bytes a second averaged over `read_timeout_secs`.
 */
min_read_bytes_per_sec: number, 
/**
 * A client that takes none of an answer waiting for it for this many seconds (a
 * streamed take it stopped reading) is disconnected, and the work for it stopped.
 */
write_timeout_secs: number, 
/**
 * Request bodies held in memory at once, across all requests (chat and speech bodies;
 * uploads go to disk). A body that does not fit is refused at once (503
 * `request_memory_full`), never queued.
 */
max_buffered_body_bytes: number, };
export type CloningSettings = { 
/**
 * `chatterbox` (Chatterbox-TTS-API), `xtts` (the XTTS API server) or `openai` (an
 * OpenAI-style speech server with server-side voice names).
 */
kind: string, 
/**
 * The server's root URL, e.g. `http://127.0.0.1:4123`; empty: no cloning server.
 */
url: string, 
/**
 * The language the text is in, for servers that ask (XTTS).
 */
language: string, };
export type PrivacySettings = { 
/**
 * Servers on other machines (origins such as `https://gpu.example:8000`) that text, voice
 * clips and audio may be sent to from the CLI and `headroom serve`. Servers on this
 * machine need no entry. The desktop asks per project instead.
 */
allow_remote: Array<string>, };
export type ServerInfo = { models: Array<ModelCard>, 
/**
 * The context length per request, when the server says: vLLM's `max_model_len`, or
 * llama.cpp's per-slot `n_ctx` from `/props`.
 */
context_tokens: number | null, 
/**
 * How many requests the server runs at once, when it says (llama.cpp's `--parallel`).
 */
slots: number | null, };
export type ModelCard = { id: string, 
/**
 * vLLM's context length for the model.
 */
max_model_len?: number | null, };
export type ModelStatus = { "state": "installed", path: string, } | { "state": "missing" } | { "state": "damaged", detail: string, };
export type ModelView = { name: string, description: string, bytes: number, status: ModelStatus, };
export type Voice = { id: string, language: string, name: string, };
export type Severity = "refused" | "warning";
export type Finding = { severity: Severity, 
/**
 * A stable name: `too_short`, `too_long`, `silent`, `too_quiet`, `clipped`,
 * `mostly_silence`, `noisy`.
 */
check: string, advice: string, };
export type ClipReport = { seconds: number, 
/**
 * Level of the speech (the loud frames' RMS), dB full scale.
 */
speech_dbfs: number, 
/**
 * The quiet frames' level, an estimate of the noise floor, dB full scale.
 */
noise_dbfs: number, 
/**
 * Speech over noise, dB.
 */
snr_db: number, 
/**
 * Share of samples at full scale.
 */
clipped_fraction: number, 
/**
 * Share of frames that are silence.
 */
silence_fraction: number, findings: Array<Finding>, };
export type ReferenceClip = { id: string, 
/**
 * The WAV file, relative to the voice's folder.
 */
file: string, seconds: number, report: ClipReport, 
/**
 * What is said in it (transcribed, or typed by the user); cloning servers may want it.
 */
transcript: string | null, embedding: number[], added_unix_ms: number, };
export type Style = { 
/**
 * (shipped style name, weight)
 */
mix: Array<[string, number]>, 
/**
 * Added to the mixture; empty or [`STYLE_DIM`] numbers.
 */
offset: Array<number>, };
export type Score = { 
/**
 * Cosine similarity by the search's own embedder (the one it maximised).
 */
similarity: number, word_error_rate: number, 
/**
 * Cosine similarity by the independent embedder (Resemblyzer), which the search never
 * used; `None` when it is not installed (or for scores kept from before it existed).
 */
similarity_independent: number | null, };
export type MatchOutcome = { style: Style, 
/**
 * The found style on the search sentences.
 */
search: Score, 
/**
 * The found style on the held-out sentences.
 */
held_out: Score, 
/**
 * The shipped style closest to the target, and its held-out score.
 */
best_shipped: string, best_shipped_held_out: Score, 
/**
 * Takes made and judged, held-out ones included.
 */
evaluations: number, seconds: number, };
export type EspeakSetting = { 
/**
 * A voice with a variant, e.g. `en-us+m3`.
 */
voice: string, pitch: number, };
export type VoiceMatch = { outcome: MatchOutcome, 
/**
 * The default voice on the same held-out sentences: what "no match" scores.
 */
default_held_out: Score, 
/**
 * The espeak-ng variant and pitch closest to the voice (the cheap first match).
 */
espeak: [EspeakSetting, Score] | null, found_unix_ms: number, 
/**
 * The clips the match was made for: a match made before clips changed is stale.
 */
clip_ids: Array<string>, };
export type VoiceProfile = { format: number, 
/**
 * The folder name; stable across renames.
 */
id: string, name: string, created_unix_ms: number, modified_unix_ms: number, clips: Array<ReferenceClip>, 
/**
 * The mean of the clips' embeddings; `None` without clips.
 */
embedding: number[] | null, 
/**
 * The voice's name on an OpenAI-style cloning server; the profile's name when unset.
 */
server_voice: string | null, matched: VoiceMatch | null, };
export type MatchProgress = { 
/**
 * `shipped`, `search` or `held_out`.
 */
stage: string, evaluations: number, 
/**
 * Every evaluation the match will make, the held-out scoring included.
 */
total: number, best_similarity: number, };
export type Closeness = { similarity: number, default_similarity: number, similarity_independent: number | null, default_similarity_independent: number | null, };
export type ClipAdded = { added: boolean, report: ClipReport, voice: VoiceProfile, };
export type VoiceTakeView = { 
/**
 * Relative to the voice's folder.
 */
file: string, method: string, closeness: Closeness, default_voice: string, duration_secs: number, };
export type SpeakerProfile = { 
/**
 * The project, with the speaker attached to the new profile.
 */
project: Project, voice: VoiceProfile, 
/**
 * The clip's checks.
 */
report: ClipReport, 
/**
 * The turns the clip was made of (segment indices) and its length.
 */
segments: Array<number>, seconds: number, };
export type CloningKind = "chatterbox" | "xtts" | "openai";
export type Health = { kind: CloningKind, 
/**
 * Shown and serialized without its secrets.
 */
url: string, 
/**
 * What the server said, in a line (its status, or the speakers it has).
 */
detail: string, };
export type SamplerStatus = { "state": "sampling", device: string, period_ms: number, samples: number, 
/**
 * The last read error, if the last read failed.
 */
last_error: string | null, } | { "state": "no_gpu", reason: string, };
export type ProcessMemory = { pid: number, 
/**
 * `None` when the driver does not say (some containers and drivers).
 */
used_bytes: number | null, };
export type DeviceMemory = { total_bytes: number, used_bytes: number, free_bytes: number, processes: Array<ProcessMemory>, };
export type MemorySample = { 
/**
 * Position in the sampler's sequence of readings (windows are cut by it).
 */
seq: number, at_ms: number, total_bytes: number, used_bytes: number, free_bytes: number, processes: Array<ProcessMemory>, };
export type GpuView = { status: SamplerStatus, samples: Array<MemorySample>, };
export type BenchmarkRun = { summary: string, html: string, json: string, };
export type WindowRendering = "software" | "gpu";
export type AppInfo = { version: string, projects_dir: string, config_path: string | null, models_dir: string, 
/**
 * How the window is drawn (`HEADROOM_WINDOW_RENDERING`, read at start).
 */
window_rendering: WindowRendering, };
export type UiErrorKind = "rejected" | "cancelled" | "changed_elsewhere" | "error";
export type UiError = { kind: UiErrorKind, message: string, rejection: Rejection | null, 
/**
 * What the user can do about a rejection, in the order to offer them.
 */
actions: Array<SuggestedAction>, };
export type FileFailureReason = "folder_unreadable" | "empty_folder" | "unreadable" | "not_audio" | "too_large" | "refused" | "failed";
export type FileFailure = { path: string, reason: FileFailureReason, 
/**
 * The detail in English (the engine's words), shown beside the reason.
 */
message: string, };
export type FileProject = { id: string, name: string, segments: number, };
export type FileOutcome = { path: string, 
/**
 * The project made of it, when it was transcribed.
 */
project: FileProject | null, 
/**
 * Why there is none: a reason the window words, and the detail.
 */
failure: FileFailure | null, };
export type ResidentModel = { 
/**
 * The model and how it is held, e.g. `whisper-base (int8)`.
 */
name: string, 
/**
 * What it is for: `transcription`, `voice activity`, `voice`, `speaker embedding`.
 */
role: string, 
/**
 * Resident memory the process gained when it loaded, in MiB (`None` where the system
 * does not say, and while it loads).
 */
resident_mib: number | null, 
/**
 * Seconds since a job last took it.
 */
idle_secs: number, 
/**
 * Whether a job holds it now (it is then never let go).
 */
in_use: boolean, 
/**
 * Whether it is being loaded now (for a job waiting on it); it is then not yet usable.
 */
loading: boolean, };
export type MemoryView = { 
/**
 * The whole process's resident memory now, in MiB (`None` where the system does not say).
 */
process_mib: number | null, 
/**
 * How long an unused model stays loaded; `None`: until memory is freed by hand.
 */
idle_after_secs: number | null, models: Array<ResidentModel>, 
/**
 * The models just let go, when this answers "free memory".
 */
released: Array<ResidentModel>, };
export type LiveLine = { start: number, end: number, text: string, };
export type RecordOutcome = { file: string, project: Project | null, live_error: UiError | null, };
export type LaneEvent = { "event": "occupancy", lane: Lane, occupancy: Occupancy, } | { "event": "rejected" } & RejectionRecord | { "event": "finished", lane: Lane, outcome: string, latency_ms: number, };
export type JobProgress = { job: string, 
/**
 * 0..=1.
 */
progress: number, step: string | null, 
/**
 * `None` for model installs, whose fraction is per file.
 */
time: JobTime | null, };
export type SegmentCleanupEvent = { project: string, segment: number, } & ({ "event": "planned", chunks: number, } | { "event": "chunk_started", index: number, attempt: number, } | { "event": "delta", index: number, text: string, } | { "event": "retrying", index: number, attempt: number, wait_ms: number, rejection: Rejection, } | { "event": "chunk_finished", index: number, source: PieceSource, });
export type CleanupProgress = { project: string, segment: number, count: number, error: UiError | null, };
export type RecordLevel = { job: string, dbfs: number, };
export type LiveTranscript = { job: string, partial: LiveLine | null, finals: Array<LiveLine>, };
export type GpuEvent = { status: SamplerStatus, latest: MemorySample | null, };
export type BenchProgress = { line: string, };
export type VoiceMatchProgress = { job: string, progress: MatchProgress, };
export type NarrationEvent = { "event": "planned", project: string, segments: number, to_do: Array<number>, } | { "event": "segment", project: string, index: number, state: SegmentState, segment: NarratedSegment, 
/**
 * Segments of this run finished so far, out of `of` (the plan's).
 */
done: number, of: number, } | { "event": "assembled", project: string, output: NarrationOutput, };

/** Every command the shell accepts. */
export const COMMANDS = [
  "app_info",
  "app_ready",
  "list_projects",
  "create_project",
  "open_project",
  "rename_project",
  "delete_project",
  "update_project_settings",
  "text_destination",
  "voice_destination",
  "project_versions",
  "restore_version",
  "transcribe",
  "transcribe_files",
  "rename_speaker",
  "merge_speakers",
  "attach_speaker",
  "profile_from_speaker",
  "split_segment",
  "set_segment_speaker",
  "cancel_job",
  "pause_job",
  "edit_segment",
  "segment_words",
  "segments_words",
  "clean_segment",
  "clean_all",
  "interrupted_jobs",
  "resume_job",
  "discard_job",
  "decide",
  "export_transcript",
  "list_voices",
  "synthesize",
  "narration",
  "narrate",
  "narrate_segment",
  "narration_languages",
  "waveform",
  "play_range",
  "change_edit",
  "export_edited",
  "play_edited",
  "play",
  "choose_save_path",
  "save_copy",
  "record",
  "resident_models",
  "free_memory",
  "lanes",
  "gpu_status",
  "get_settings",
  "save_settings",
  "test_connection",
  "models",
  "install_model",
  "run_benchmark",
  "open_report",
  "voice_profiles",
  "create_voice",
  "rename_voice",
  "delete_voice",
  "add_voice_clip",
  "record_voice_clip",
  "remove_voice_clip",
  "set_clip_transcript",
  "match_voice",
  "speak_as_voice",
  "play_voice_file",
  "cloning_health",
] as const;
export type Command = (typeof COMMANDS)[number];

/** The audio file extensions the decoder reads (any case). */
export const AUDIO_EXTENSIONS = ["wav", "mp3", "flac", "ogg", "opus", "m4a", "aac", "mp4", "mov", "mkv", "webm"] as const;

/** Each command's arguments, as the web view sends them (camelCase). */
export type CommandArgs = {
  "app_info": Record<string, never>;
  "app_ready": Record<string, never>;
  "list_projects": Record<string, never>;
  "segment_words": { project: string; index: number };
  "segments_words": { project: string; from: number; count: number };
  "create_project": { name: string };
  "open_project": { id: string };
  "project_versions": { id: string };
  "restore_version": { id: string; version: string };
  "voice_destination": { id: string };
  "text_destination": { id: string };
  "rename_project": { id: string; name: string };
  "delete_project": { id: string };
  "update_project_settings": { id: string; settings: ProjectSettings; shown: ProjectSettings };
  "transcribe": { project: string; path: string; job: string };
  "transcribe_files": { paths: string[]; job: string; servers: BatchServers | null; model: string | null };
  "rename_speaker": { project: string; speaker: string; name: string; shown: Speaker[] };
  "merge_speakers": { project: string; from: string; into: string; shown: Speaker[] };
  "attach_speaker": { project: string; speaker: string; profile: string | null; shown: Speaker[] };
  "profile_from_speaker": { project: string; speaker: string; name: string | null; job: string };
  "split_segment": { project: string; index: number; at: SplitAt; speaker: string | null; shown: ProjectSegment };
  "set_segment_speaker": { project: string; index: number; speaker: string | null; shown: ProjectSegment };
  "cancel_job": { job: string };
  "pause_job": { job: string };
  "edit_segment": { project: string; index: number; text: string };
  "clean_segment": { project: string; index: number; rulesOnly: boolean; job: string };
  "clean_all": { project: string; rulesOnly: boolean; job: string };
  "interrupted_jobs": Record<string, never>;
  "discard_job": { project: string; id: string };
  "resume_job": { project: string; id: string; job: string };
  "decide": { project: string; segment: number | null; decision: Decision };
  "export_transcript": { project: string; format: string };
  "change_edit": { project: string; change: EditChange; job: string };
  "export_edited": { project: string; format: string; fps: number; job: string };
  "play_edited": { project: string; from: number; job: string };
  "list_voices": Record<string, never>;
  "synthesize": { project: string; segment: number | null; job: string };
  "narrate": { project: string; options: NarrationOptions; job: string };
  "narrate_segment": { project: string; index: number; job: string };
  "narration": { project: string };
  "narration_languages": Record<string, never>;
  "waveform": { project: string; file: string; buckets: number };
  "play_range": { project: string; file: string; start: number; end: number; job: string };
  "play": { project: string; file: string; job: string };
  "choose_save_path": { fileName: string };
  "save_copy": { project: string; file: string; destination: string };
  "record": { project: string; maxSeconds: number; live: boolean; job: string };
  "resident_models": Record<string, never>;
  "free_memory": Record<string, never>;
  "lanes": Record<string, never>;
  "gpu_status": Record<string, never>;
  "get_settings": Record<string, never>;
  "save_settings": { settings: Config };
  "test_connection": { url: string };
  "models": Record<string, never>;
  "install_model": { name: string; job: string };
  "run_benchmark": Record<string, never>;
  "open_report": { path: string };
  "voice_profiles": Record<string, never>;
  "create_voice": { name: string };
  "rename_voice": { voice: string; name: string };
  "delete_voice": { voice: string };
  "add_voice_clip": { voice: string; path: string; job: string };
  "record_voice_clip": { voice: string; maxSeconds: number; job: string };
  "remove_voice_clip": { voice: string; clip: string };
  "set_clip_transcript": { voice: string; clip: string; transcript: string };
  "match_voice": { voice: string; budget: number; job: string };
  "speak_as_voice": { voice: string; text: string; job: string };
  "play_voice_file": { voice: string; file: string; job: string };
  "cloning_health": Record<string, never>;
};

/** What each command answers. */
export type CommandResults = {
  "app_info": AppInfo;
  "app_ready": number;
  "list_projects": ProjectEntry[];
  "segment_words": ProjectWord[];
  "segments_words": ProjectWord[][];
  "create_project": Project;
  "open_project": Project;
  "project_versions": VersionInfo[];
  "restore_version": Project;
  "voice_destination": TextDestination | null;
  "text_destination": TextDestination;
  "rename_project": Project;
  "delete_project": void;
  "update_project_settings": Project;
  "transcribe": Project;
  "transcribe_files": FileOutcome[];
  "rename_speaker": Project;
  "merge_speakers": Project;
  "attach_speaker": Project;
  "profile_from_speaker": SpeakerProfile;
  "split_segment": Project;
  "set_segment_speaker": Project;
  "cancel_job": boolean;
  "pause_job": boolean;
  "edit_segment": SegmentSaved;
  "clean_segment": Suggestion;
  "clean_all": CleanupSummary;
  "interrupted_jobs": JobInfo[];
  "discard_job": void;
  "resume_job": JobOutcome;
  "decide": Project;
  "export_transcript": string;
  "change_edit": EditSummary;
  "export_edited": string;
  "play_edited": void;
  "list_voices": Voice[];
  "synthesize": SpeechTake;
  "narrate": NarrationSummary;
  "narrate_segment": NarrationSummary;
  "narration": NarrationView;
  "narration_languages": LanguageView[];
  "waveform": Waveform;
  "play_range": void;
  "play": void;
  "choose_save_path": string | null;
  "save_copy": string;
  "record": RecordOutcome;
  "resident_models": MemoryView;
  "free_memory": MemoryView;
  "lanes": LaneView[];
  "gpu_status": GpuView;
  "get_settings": Config;
  "save_settings": void;
  "test_connection": ServerInfo;
  "models": ModelView[];
  "install_model": string;
  "run_benchmark": BenchmarkRun;
  "open_report": void;
  "voice_profiles": VoiceProfile[];
  "create_voice": VoiceProfile;
  "rename_voice": VoiceProfile;
  "delete_voice": void;
  "add_voice_clip": ClipAdded;
  "record_voice_clip": ClipAdded;
  "remove_voice_clip": VoiceProfile;
  "set_clip_transcript": VoiceProfile;
  "match_voice": VoiceProfile;
  "speak_as_voice": VoiceTakeView;
  "play_voice_file": void;
  "cloning_health": Health;
};

/** Every event the shell emits, with its payload. */
export type EventPayloads = {
  "lane": LaneEvent;
  "job-progress": JobProgress;
  "cleanup": SegmentCleanupEvent;
  "cleanup-progress": CleanupProgress;
  "record-level": RecordLevel;
  "live-transcript": LiveTranscript;
  "gpu": GpuEvent;
  "bench": BenchProgress;
  "voice-match-progress": VoiceMatchProgress;
  "narration": NarrationEvent;
};
export type EventName = keyof EventPayloads;

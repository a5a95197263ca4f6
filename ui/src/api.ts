// Typed calls into the desktop shell. Every type, command name and event name comes from
// ./bindings.ts, which is generated from the Rust definitions (src-tauri/bindings.rs).
import { invoke } from "@tauri-apps/api/core";
import { listen, type UnlistenFn } from "@tauri-apps/api/event";
import type {
  BatchServers,
  Command,
  CommandArgs,
  CommandResults,
  Config,
  Decision,
  EditChange,
  EventName,
  EventPayloads,
  ProjectSettings,
  UiError,
  NarrationOptions,
  Speaker,
  ProjectSegment,
  SplitAt,
} from "./bindings";

export type {
  AppInfo,
  BatchServers,
  FileFailureReason,
  FileOutcome,
  LiveLine,
  MemoryView,
  RecordOutcome,
  ResidentModel,
  BenchmarkRun,
  CleanupSummary,
  JobInfo,
  JobTime,
  JobOutcome,
  CleanupMode,
  Decision,
  FailurePolicy,
  GpuEvent,
  GpuView,
  Lane,
  LaneEvent,
  LaneView,
  CpuShareView,
  MemorySample,
  ModelView,
  Occupancy,
  Project,
  ProjectEntry,
  ProjectSettings,
  RejectReason,
  Rejection,
  RejectionRecord,
  ServerInfo,
  SpeechTake,
  SuggestedAction,
  Suggestion,
  TextDestination,
  UiError,
  VersionInfo,
  Voice,
} from "./bindings";
export type { CrossedSignal, UpstreamView, TextNote, VoiceNote } from "./bindings";
export type { EditChange, EditIntent, EditList, EditSummary, FoundFiller } from "./bindings";
export type { Speaker, SplitAt, SpeakerProfile, SpeakerVoice, ProjectWord } from "./bindings";
export type { VoiceProfile, ClipAdded, VoiceTakeView, Health, MatchProgress, ClipReport } from "./bindings";
export type {
  LanguageView,
  NarratedSegment,
  Narration,
  NarrationEvent,
  NarrationMode,
  NarrationOptions,
  NarrationSummary,
  NarrationView,
  SegmentState,
  Waveform,
} from "./bindings";
export type { Config as Settings, ProjectSegment as Segment, SamplerStatus as GpuStatus } from "./bindings";
export type { SegmentCleanupEvent as CleanupEvent } from "./bindings";

export function asUiError(e: unknown): UiError {
  if (e && typeof e === "object" && "message" in e && "kind" in e) {
    const err = e as UiError;
    return { ...err, rejection: err.rejection ?? null, actions: err.actions ?? [] };
  }
  return { kind: "error", message: String(e), rejection: null, actions: [] };
}

/** A command's arguments: nothing for a command that takes none. */
type ArgsOf<C extends Command> = CommandArgs[C] extends Record<string, never> ? [] : [args: CommandArgs[C]];

/** Calls a command by its generated name, with the arguments and result its Rust signature
 * has (both generated): a renamed or retyped parameter fails the build here, not at run time. */
function call<C extends Command>(command: C, ...args: ArgsOf<C>): Promise<CommandResults[C]> {
  return invoke<CommandResults[C]>(command, args[0]);
}

let nextJob = 0;
/** A fresh id for a cancellable job. */
export function jobId(kind: string): string {
  nextJob += 1;
  return `${kind}-${Date.now()}-${nextJob}`;
}

export const api = {
  appInfo: () => call("app_info"),
  appReady: () => call("app_ready"),
  listProjects: () => call("list_projects"),
  createProject: (name: string) => call("create_project", { name }),
  openProject: (id: string) => call("open_project", { id }),
  renameProject: (id: string, name: string) => call("rename_project", { id, name }),
  deleteProject: (id: string) => call("delete_project", { id }),
  /** Saves settings edited from `shown`; refused as changed_elsewhere if those are stale. */
  updateProjectSettings: (id: string, settings: ProjectSettings, shown: ProjectSettings) =>
    call("update_project_settings", { id, settings, shown }),
  textDestination: (id: string) => call("text_destination", { id }),
  voiceDestination: (id: string) => call("voice_destination", { id }),
  projectVersions: (id: string) => call("project_versions", { id }),
  restoreVersion: (id: string, version: string) => call("restore_version", { id, version }),
  transcribe: (project: string, path: string, job: string) =>
    call("transcribe", { project, path, job }),
  /** Several files as one queued job: a project of each, transcribed as batch work; on
   * `servers` when given (`model`: the name they know it by). */
  transcribeFiles: (paths: string[], job: string, servers: BatchServers | null = null, model: string | null = null) =>
    call("transcribe_files", { paths, job, servers, model }),
  cancelJob: (job: string) => call("cancel_job", { job }),
  pauseJob: (job: string) => call("pause_job", { job }),
  /** Names a speaker everywhere; `shown` is the speakers as the view showed them. */
  renameSpeaker: (project: string, speaker: string, name: string, shown: Speaker[]) =>
    call("rename_speaker", { project, speaker, name, shown }),
  mergeSpeakers: (project: string, from: string, into: string, shown: Speaker[]) =>
    call("merge_speakers", { project, from, into, shown }),
  /** "This is <profile>" (`null` detaches the speaker). */
  attachSpeaker: (project: string, speaker: string, profile: string | null, shown: Speaker[]) =>
    call("attach_speaker", { project, speaker, profile, shown }),
  profileFromSpeaker: (project: string, speaker: string, name: string | null, job: string) =>
    call("profile_from_speaker", { project, speaker, name, job }),
  /** Splits a segment; the new part gets `speaker` ("new" for a new one) or the segment's. */
  splitSegment: (project: string, index: number, at: SplitAt, speaker: string | null, shown: ProjectSegment) =>
    call("split_segment", { project, index, at, speaker, shown }),
  setSegmentSpeaker: (project: string, index: number, speaker: string | null, shown: ProjectSegment) =>
    call("set_segment_speaker", { project, index, speaker, shown }),
  editSegment: (project: string, index: number, text: string) =>
    call("edit_segment", { project, index, text }),
  /** Changes the edit of the project's recording (an empty change: shows it), as a job. */
  changeEdit: (project: string, change: EditChange, job: string) => call("change_edit", { project, change, job }),
  /** Writes the edited recording, its re-timed transcript or its cut list into `exports/`. */
  exportEdited: (project: string, format: string, fps: number, job: string) =>
    call("export_edited", { project, format, fps, job }),
  /** Plays the edited recording from `from` seconds of the original to its end. */
  playEdited: (project: string, from: number, job: string) => call("play_edited", { project, from, job }),
  /** The words of `count` segments from `from` (at most 200), with their times. */
  segmentsWords: (project: string, from: number, count: number) =>
    call("segments_words", { project, from, count }),
  /** A segment's words with their times (the window's projects carry none). */
  segmentWords: (project: string, index: number) => call("segment_words", { project, index }),
  cleanSegment: (project: string, index: number, rulesOnly: boolean, job: string) =>
    call("clean_segment", { project, index, rulesOnly, job }),
  /** Cleans every segment as a job recorded in the project; refusals come per segment. */
  cleanAll: (project: string, rulesOnly: boolean, job: string) =>
    call("clean_all", { project, rulesOnly, job }),
  interruptedJobs: () => call("interrupted_jobs"),
  resumeJob: (project: string, id: string, job: string) => call("resume_job", { project, id, job }),
  discardJob: (project: string, id: string) => call("discard_job", { project, id }),
  decide: (project: string, segment: number | null, decision: Decision) =>
    call("decide", { project, segment, decision }),
  exportTranscript: (project: string, format: string) =>
    call("export_transcript", { project, format }),
  listVoices: () => call("list_voices"),
  synthesize: (project: string, segment: number | null, job: string) =>
    call("synthesize", { project, segment, job }),
  play: (project: string, file: string, job: string) => call("play", { project, file, job }),
  /** Plays seconds `start` to `end` of a project file. */
  playRange: (project: string, file: string, start: number, end: number, job: string) =>
    call("play_range", { project, file, start, end, job }),
  waveform: (project: string, file: string, buckets: number) => call("waveform", { project, file, buckets }),
  narrationLanguages: () => call("narration_languages"),
  narration: (project: string) => call("narration", { project }),
  /** Narrates the project; each segment's state comes as `narration` events. */
  narrate: (project: string, options: NarrationOptions, job: string) =>
    call("narrate", { project, options, job }),
  narrateSegment: (project: string, index: number, job: string) =>
    call("narrate_segment", { project, index, job }),
  chooseSavePath: (fileName: string) => call("choose_save_path", { fileName }),
  saveCopy: (project: string, file: string, destination: string) =>
    call("save_copy", { project, file, destination }),
  /** Records into the project; with `live`, transcribes while recording (see `live-transcript`). */
  record: (project: string, maxSeconds: number, live: boolean, job: string) =>
    call("record", { project, maxSeconds, live, job }),
  /** The app's memory and the speech models loaded in it. */
  residentModels: () => call("resident_models"),
  /** Lets go of every speech model no job is using. */
  freeMemory: () => call("free_memory"),
  lanes: () => call("lanes"),
  gpuStatus: () => call("gpu_status"),
  getSettings: () => call("get_settings"),
  saveSettings: (settings: Config) => call("save_settings", { settings }),
  testConnection: (url: string) => call("test_connection", { url }),
  models: () => call("models"),
  installModel: (name: string, job: string) => call("install_model", { name, job }),
  runBenchmark: () => call("run_benchmark"),
  openReport: (path: string) => call("open_report", { path }),
  voiceProfiles: () => call("voice_profiles"),
  createVoice: (name: string) => call("create_voice", { name }),
  renameVoice: (voice: string, name: string) => call("rename_voice", { voice, name }),
  deleteVoice: (voice: string) => call("delete_voice", { voice }),
  /** Checks, transcribes and embeds a clip; a refused clip comes back with `added: false`. */
  addVoiceClip: (voice: string, path: string, job: string) => call("add_voice_clip", { voice, path, job }),
  /** Records a clip (until maxSeconds or the job is cancelled, which keeps it), then adds it. */
  recordVoiceClip: (voice: string, maxSeconds: number, job: string) =>
    call("record_voice_clip", { voice, maxSeconds, job }),
  removeVoiceClip: (voice: string, clip: string) => call("remove_voice_clip", { voice, clip }),
  setClipTranscript: (voice: string, clip: string, transcript: string) =>
    call("set_clip_transcript", { voice, clip, transcript }),
  matchVoice: (voice: string, budget: number, job: string) => call("match_voice", { voice, budget, job }),
  speakAsVoice: (voice: string, text: string, job: string) =>
    call("speak_as_voice", { voice, text, job }),
  playVoiceFile: (voice: string, file: string, job: string) => call("play_voice_file", { voice, file, job }),
  cloningHealth: () => call("cloning_health"),
};

/** Listens to one of the shell's events, typed by its generated payload. */
export function on<E extends EventName>(event: E, handler: (payload: EventPayloads[E]) => void): Promise<UnlistenFn> {
  return listen<EventPayloads[E]>(event, (e) => handler(e.payload));
}

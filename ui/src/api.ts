// Typed calls into the desktop shell. Every type, command name and event name comes from
// ./bindings.ts, which is generated from the Rust definitions (src-tauri/bindings.rs).
import { invoke } from "@tauri-apps/api/core";
import { listen, type UnlistenFn } from "@tauri-apps/api/event";
import type {
  AppInfo,
  BenchmarkRun,
  FileOutcome,
  CleanupSummary,
  Command,
  Config,
  Decision,
  EventName,
  EventPayloads,
  GpuView,
  JobInfo,
  JobOutcome,
  LaneView,
  ModelView,
  Project,
  ProjectEntry,
  ProjectSettings,
  ServerInfo,
  SpeechTake,
  Suggestion,
  TextDestination,
  UiError,
  VersionInfo,
  Voice,
  VoiceProfile,
  ClipAdded,
  VoiceTakeView,
  Health,
  LanguageView,
  NarrationOptions,
  NarrationSummary,
  NarrationView,
  Waveform,
  RecordOutcome,
  MemoryView,
  Speaker,
  ProjectSegment,
  SplitAt,
  SpeakerProfile,
} from "./bindings";

export type {
  AppInfo,
  FileOutcome,
  LiveLine,
  MemoryView,
  RecordOutcome,
  ResidentModel,
  BenchmarkRun,
  CleanupSummary,
  JobInfo,
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

/** Calls a command by its generated name. */
function call<T>(command: Command, args?: Record<string, unknown>): Promise<T> {
  return invoke<T>(command, args);
}

let nextJob = 0;
/** A fresh id for a cancellable job. */
export function jobId(kind: string): string {
  nextJob += 1;
  return `${kind}-${Date.now()}-${nextJob}`;
}

export const api = {
  appInfo: () => call<AppInfo>("app_info"),
  appReady: () => call<number>("app_ready"),
  listProjects: () => call<ProjectEntry[]>("list_projects"),
  createProject: (name: string) => call<Project>("create_project", { name }),
  openProject: (id: string) => call<Project>("open_project", { id }),
  renameProject: (id: string, name: string) => call<Project>("rename_project", { id, name }),
  deleteProject: (id: string) => call<void>("delete_project", { id }),
  /** Saves settings edited from `shown`; refused as changed_elsewhere if those are stale. */
  updateProjectSettings: (id: string, settings: ProjectSettings, shown: ProjectSettings) =>
    call<Project>("update_project_settings", { id, settings, shown }),
  textDestination: (id: string) => call<TextDestination>("text_destination", { id }),
  voiceDestination: (id: string) => call<TextDestination | null>("voice_destination", { id }),
  projectVersions: (id: string) => call<VersionInfo[]>("project_versions", { id }),
  restoreVersion: (id: string, version: string) => call<Project>("restore_version", { id, version }),
  transcribe: (project: string, path: string, job: string) =>
    call<Project>("transcribe", { project, path, job }),
  /** Several files as one queued job: a project of each, transcribed as batch work. */
  transcribeFiles: (paths: string[], job: string) =>
    call<FileOutcome[]>("transcribe_files", { paths, job }),
  cancelJob: (job: string) => call<boolean>("cancel_job", { job }),
  /** Names a speaker everywhere; `shown` is the speakers as the view showed them. */
  renameSpeaker: (project: string, speaker: string, name: string, shown: Speaker[]) =>
    call<Project>("rename_speaker", { project, speaker, name, shown }),
  mergeSpeakers: (project: string, from: string, into: string, shown: Speaker[]) =>
    call<Project>("merge_speakers", { project, from, into, shown }),
  /** "This is <profile>" (`null` detaches the speaker). */
  attachSpeaker: (project: string, speaker: string, profile: string | null, shown: Speaker[]) =>
    call<Project>("attach_speaker", { project, speaker, profile, shown }),
  profileFromSpeaker: (project: string, speaker: string, name: string | null, job: string) =>
    call<SpeakerProfile>("profile_from_speaker", { project, speaker, name, job }),
  /** Splits a segment; the new part gets `speaker` ("new" for a new one) or the segment's. */
  splitSegment: (project: string, index: number, at: SplitAt, speaker: string | null, shown: ProjectSegment) =>
    call<Project>("split_segment", { project, index, at, speaker, shown }),
  setSegmentSpeaker: (project: string, index: number, speaker: string | null, shown: ProjectSegment) =>
    call<Project>("set_segment_speaker", { project, index, speaker, shown }),
  editSegment: (project: string, index: number, text: string) =>
    call<Project>("edit_segment", { project, index, text }),
  cleanSegment: (project: string, index: number, rulesOnly: boolean, job: string) =>
    call<Suggestion>("clean_segment", { project, index, rulesOnly, job }),
  /** Cleans every segment as a job recorded in the project; refusals come per segment. */
  cleanAll: (project: string, rulesOnly: boolean, job: string) =>
    call<CleanupSummary>("clean_all", { project, rulesOnly, job }),
  interruptedJobs: () => call<JobInfo[]>("interrupted_jobs"),
  resumeJob: (project: string, id: string, job: string) => call<JobOutcome>("resume_job", { project, id, job }),
  discardJob: (project: string, id: string) => call<void>("discard_job", { project, id }),
  decide: (project: string, segment: number | null, decision: Decision) =>
    call<Project>("decide", { project, segment, decision }),
  exportTranscript: (project: string, format: string) =>
    call<string>("export_transcript", { project, format }),
  listVoices: () => call<Voice[]>("list_voices"),
  synthesize: (project: string, segment: number | null, job: string) =>
    call<SpeechTake>("synthesize", { project, segment, job }),
  play: (project: string, file: string, job: string) => call<void>("play", { project, file, job }),
  /** Plays seconds `start` to `end` of a project file. */
  playRange: (project: string, file: string, start: number, end: number, job: string) =>
    call<void>("play_range", { project, file, start, end, job }),
  waveform: (project: string, file: string, buckets: number) => call<Waveform>("waveform", { project, file, buckets }),
  narrationLanguages: () => call<LanguageView[]>("narration_languages"),
  narration: (project: string) => call<NarrationView>("narration", { project }),
  /** Narrates the project; each segment's state comes as `narration` events. */
  narrate: (project: string, options: NarrationOptions, job: string) =>
    call<NarrationSummary>("narrate", { project, options, job }),
  narrateSegment: (project: string, index: number, job: string) =>
    call<NarrationSummary>("narrate_segment", { project, index, job }),
  chooseSavePath: (fileName: string) => call<string | null>("choose_save_path", { fileName }),
  saveCopy: (project: string, file: string, destination: string) =>
    call<string>("save_copy", { project, file, destination }),
  /** Records into the project; with `live`, transcribes while recording (see `live-transcript`). */
  record: (project: string, maxSeconds: number, live: boolean, job: string) =>
    call<RecordOutcome>("record", { project, maxSeconds, live, job }),
  /** The app's memory and the speech models loaded in it. */
  residentModels: () => call<MemoryView>("resident_models"),
  /** Lets go of every speech model no job is using. */
  freeMemory: () => call<MemoryView>("free_memory"),
  lanes: () => call<LaneView[]>("lanes"),
  gpuStatus: () => call<GpuView>("gpu_status"),
  getSettings: () => call<Config>("get_settings"),
  saveSettings: (settings: Config) => call<void>("save_settings", { settings }),
  testConnection: (url: string) => call<ServerInfo>("test_connection", { url }),
  models: () => call<ModelView[]>("models"),
  installModel: (name: string, job: string) => call<string>("install_model", { name, job }),
  runBenchmark: () => call<BenchmarkRun>("run_benchmark"),
  openReport: (path: string) => call<void>("open_report", { path }),
  voiceProfiles: () => call<VoiceProfile[]>("voice_profiles"),
  createVoice: (name: string) => call<VoiceProfile>("create_voice", { name }),
  renameVoice: (voice: string, name: string) => call<VoiceProfile>("rename_voice", { voice, name }),
  deleteVoice: (voice: string) => call<void>("delete_voice", { voice }),
  /** Checks, transcribes and embeds a clip; a refused clip comes back with `added: false`. */
  addVoiceClip: (voice: string, path: string, job: string) => call<ClipAdded>("add_voice_clip", { voice, path, job }),
  /** Records a clip (until maxSeconds or the job is cancelled, which keeps it), then adds it. */
  recordVoiceClip: (voice: string, maxSeconds: number, job: string) =>
    call<ClipAdded>("record_voice_clip", { voice, maxSeconds, job }),
  removeVoiceClip: (voice: string, clip: string) => call<VoiceProfile>("remove_voice_clip", { voice, clip }),
  setClipTranscript: (voice: string, clip: string, transcript: string) =>
    call<VoiceProfile>("set_clip_transcript", { voice, clip, transcript }),
  matchVoice: (voice: string, budget: number, job: string) => call<VoiceProfile>("match_voice", { voice, budget, job }),
  speakAsVoice: (voice: string, text: string, job: string) =>
    call<VoiceTakeView>("speak_as_voice", { voice, text, job }),
  playVoiceFile: (voice: string, file: string, job: string) => call<void>("play_voice_file", { voice, file, job }),
  cloningHealth: () => call<Health>("cloning_health"),
};

/** Listens to one of the shell's events, typed by its generated payload. */
export function on<E extends EventName>(event: E, handler: (payload: EventPayloads[E]) => void): Promise<UnlistenFn> {
  return listen<EventPayloads[E]>(event, (e) => handler(e.payload));
}

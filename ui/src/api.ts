// Typed calls into the desktop shell. Shapes mirror the Rust types' serde output.
import { invoke } from "@tauri-apps/api/core";
import { listen, type UnlistenFn } from "@tauri-apps/api/event";

export type Lane = "text" | "audio";

export interface Occupancy {
  in_flight: number;
  limit: number;
  waiting: number;
  wait_limit: number;
}

export interface Rejection {
  reason: string;
  lane: Lane;
  in_flight: number;
  limit: number;
  waiting: number;
  wait_limit: number;
  position: number | null;
  retry_after_ms: number | null;
  deadline: string | null;
  detail: string | null;
  after_output: boolean;
}

export type SuggestedAction =
  | { action: "retry_after"; after_ms: number }
  | { action: "use_rule_based_cleanup" }
  | { action: "split_input" }
  | { action: "check_server" };

/** An error from a command: a rejection keeps its typed fields and actions. */
export interface UiError {
  kind: "rejected" | "cancelled" | "error";
  message: string;
  rejection?: Rejection;
  actions: SuggestedAction[];
}

export function asUiError(e: unknown): UiError {
  if (e && typeof e === "object" && "message" in e && "kind" in e) {
    const err = e as UiError;
    return { ...err, actions: err.actions ?? [] };
  }
  return { kind: "error", message: String(e), actions: [] };
}

export interface RejectionRecord {
  at_unix_ms: number;
  rejection: Rejection;
}

export interface LaneView {
  server_url: string | null;
  lane: Lane;
  occupancy: Occupancy;
  admitted_total: number;
  rejected_total: Record<string, number>;
  recent_rejections: RejectionRecord[];
  median_latency_ms: number | null;
}

export type LaneEvent =
  | { event: "occupancy"; lane: Lane; occupancy: Occupancy }
  | ({ event: "rejected" } & RejectionRecord)
  | { event: "finished"; lane: Lane; outcome: string; latency_ms: number };

export type FailurePolicy = "reject" | "fallback" | "retry";
export type CleanupMode = "cleanup" | "rewrite";

export interface ProjectSettings {
  llm_cleanup: boolean;
  failure_policy: FailurePolicy;
  cleanup_mode: CleanupMode;
  server_url: string | null;
  voice: string | null;
}

export type Decision = "pending" | "accepted" | "rejected";

export interface Suggestion {
  text: string;
  source: "llm" | "rule_based";
  note?: string;
  decision: Decision;
}

export interface Segment {
  start: number;
  end: number;
  text: string;
  suggestion?: Suggestion;
}

export interface SpeechTake {
  file: string;
  voice: string | null;
  segment: number | null;
  duration_secs: number;
  created_unix_ms: number;
}

export interface Project {
  id: string;
  name: string;
  created_unix_ms: number;
  modified_unix_ms: number;
  settings: ProjectSettings;
  source_audio: string | null;
  language: string | null;
  duration_secs: number;
  segments: Segment[];
  speech: SpeechTake[];
}

export type ProjectEntry =
  | { state: "ok"; id: string; name: string; modified_unix_ms: number; segments: number }
  | { state: "unreadable"; id: string; error: string };

export interface Voice {
  id: string;
  language: string;
  name: string;
}

export type GpuStatus =
  | { state: "sampling"; device: string; period_ms: number; samples: number; last_error: string | null }
  | { state: "no_gpu"; reason: string };

export interface MemorySample {
  at_ms: number;
  total_bytes: number;
  used_bytes: number;
  free_bytes: number;
  processes: { pid: number; used_bytes: number | null }[];
}

/** The GPU panel's state: status plus the readings so far. */
export interface GpuView {
  status: GpuStatus;
  samples: MemorySample[];
}

/** Pushed every second. */
export interface GpuEvent {
  status: GpuStatus;
  latest: MemorySample | null;
}

export interface Settings {
  llm: { url: string; model: string | null };
  text_lane: {
    max_in_flight: number;
    max_waiting: number;
    context_tokens: number | null;
    max_input_chars: number;
    max_tokens: number;
    queue_wait_secs: number;
    first_chunk_secs: number;
    total_secs: number;
    yield_to_audio: "none" | "gate" | "preempt";
    audio_headroom_mib: number | null;
  };
  audio_lane: { max_in_flight: number; max_waiting: number; queue_wait_secs: number };
  cleanup: unknown;
  server: unknown;
}

export interface ServerInfo {
  models: { id: string }[];
  context_tokens: number | null;
}

export interface ModelView {
  name: string;
  description: string;
  bytes: number;
  status: { state: "installed"; path: string } | { state: "missing" } | { state: "damaged"; detail: string };
}

export interface BenchmarkRun {
  summary: string;
  html: string;
  json: string;
}

export interface AppInfo {
  version: string;
  projects_dir: string;
  config_path: string | null;
  models_dir: string;
}

export type CleanupEvent = { project: string; segment: number } & (
  | { event: "planned"; chunks: number }
  | { event: "chunk_started"; index: number; attempt: number }
  | { event: "delta"; index: number; text: string }
  | { event: "retrying"; index: number; attempt: number; wait_ms: number; rejection: Rejection }
  | { event: "chunk_finished"; index: number }
);

let nextJob = 0;
/** A fresh id for a cancellable job. */
export function jobId(kind: string): string {
  nextJob += 1;
  return `${kind}-${Date.now()}-${nextJob}`;
}

export const api = {
  appInfo: () => invoke<AppInfo>("app_info"),
  appReady: () => invoke<number>("app_ready"),
  listProjects: () => invoke<ProjectEntry[]>("list_projects"),
  createProject: (name: string) => invoke<Project>("create_project", { name }),
  openProject: (id: string) => invoke<Project>("open_project", { id }),
  renameProject: (id: string, name: string) => invoke<Project>("rename_project", { id, name }),
  deleteProject: (id: string) => invoke<void>("delete_project", { id }),
  updateProjectSettings: (id: string, settings: ProjectSettings) =>
    invoke<Project>("update_project_settings", { id, settings }),
  transcribe: (project: string, path: string, job: string) =>
    invoke<Project>("transcribe", { project, path, job }),
  cancelJob: (job: string) => invoke<boolean>("cancel_job", { job }),
  editSegment: (project: string, index: number, text: string) =>
    invoke<Project>("edit_segment", { project, index, text }),
  cleanSegment: (project: string, index: number, rulesOnly: boolean, job: string) =>
    invoke<Suggestion>("clean_segment", { project, index, rulesOnly, job }),
  decide: (project: string, segment: number | null, decision: Decision) =>
    invoke<Project>("decide", { project, segment, decision }),
  exportTranscript: (project: string, format: string) =>
    invoke<string>("export_transcript", { project, format }),
  listVoices: () => invoke<Voice[]>("list_voices"),
  synthesize: (project: string, segment: number | null, job: string) =>
    invoke<SpeechTake>("synthesize", { project, segment, job }),
  play: (project: string, file: string, job: string) => invoke<void>("play", { project, file, job }),
  saveCopy: (project: string, file: string, destination: string) =>
    invoke<string>("save_copy", { project, file, destination }),
  record: (project: string, maxSeconds: number, job: string) =>
    invoke<string>("record", { project, maxSeconds, job }),
  lanes: () => invoke<LaneView[]>("lanes"),
  gpuStatus: () => invoke<GpuView>("gpu_status"),
  getSettings: () => invoke<Settings>("get_settings"),
  saveSettings: (settings: Settings) => invoke<void>("save_settings", { settings }),
  testConnection: (url: string) => invoke<ServerInfo>("test_connection", { url }),
  models: () => invoke<ModelView[]>("models"),
  installModel: (name: string, job: string) => invoke<string>("install_model", { name, job }),
  runBenchmark: () => invoke<BenchmarkRun>("run_benchmark"),
  openReport: (path: string) => invoke<void>("open_report", { path }),
};

export function on<T>(event: string, handler: (payload: T) => void): Promise<UnlistenFn> {
  return listen<T>(event, (e) => handler(e.payload));
}

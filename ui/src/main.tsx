// The workstation window: navigation, the current project's views, and the lanes and GPU
// panels that stay visible while working.
import { render } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import {
  api,
  asUiError,
  type AppInfo,
  type GpuEvent,
  type GpuStatus,
  type LaneView,
  type Project,
  type ProjectEntry,
  type UiError,
} from "./api";
import { Announcer, announce, useFocusHeadingOn } from "./a11y";
import type { SegmentSaved } from "./bindings";
import { withSavedSegment } from "./project";
import { useEvent } from "./hooks";
import { GpuPanel, toPoint, type GpuPoint } from "./panels/gpu";
import { MemoryPanel } from "./panels/memory";
import { InterruptedJobs } from "./panels/jobs";
import { LanesPanel } from "./panels/lanes";
import { onLocaleChange, t, type MessageKey } from "./i18n";
import { ErrorNotice } from "./rejection";
import { CleanupView } from "./views/cleanup";
import { NarrationView } from "./views/narration";
import { ProjectsView } from "./views/projects";
import { SettingsView } from "./views/settings";
import { SynthesizeView } from "./views/synthesize";
import { TranscribeView } from "./views/transcribe";
import { VoicesView } from "./views/voices";

type View = "projects" | "transcribe" | "cleanup" | "synthesize" | "narration" | "voices" | "settings";

const VIEWS: { id: View; label: MessageKey; needsProject: boolean }[] = [
  { id: "projects", label: "nav.projects", needsProject: false },
  { id: "transcribe", label: "nav.transcribe", needsProject: true },
  { id: "cleanup", label: "nav.cleanup", needsProject: true },
  { id: "synthesize", label: "nav.synthesize", needsProject: true },
  { id: "narration", label: "nav.narration", needsProject: true },
  { id: "voices", label: "nav.voices", needsProject: false },
  { id: "settings", label: "nav.settings", needsProject: false },
];

/** Keep this many GPU readings for the chart. */
const GPU_POINTS = 600;

function App() {
  const [info, setInfo] = useState<AppInfo | null>(null);
  const [view, setView] = useState<View>("projects");
  const [entries, setEntries] = useState<ProjectEntry[]>([]);
  const [project, setProject] = useState<Project | null>(null);
  const [lanes, setLanes] = useState<LaneView[]>([]);
  const [gpu, setGpu] = useState<GpuStatus | null>(null);
  const [gpuPoints, setGpuPoints] = useState<GpuPoint[]>([]);
  const [error, setError] = useState<UiError | null>(null);
  const lanesPending = useRef(false);
  // A change of language (Settings) renders the whole window again in it.
  const [, setLocale] = useState(0);
  useEffect(() => onLocaleChange(() => setLocale((n) => n + 1)), []);

  const refreshProjects = useCallback(() => {
    api.listProjects().then(setEntries, (e) => setError(asUiError(e)));
  }, []);

  // Lane events arrive in bursts under load; one snapshot fetch at a time is enough.
  const refreshLanes = useCallback(() => {
    if (lanesPending.current) return;
    lanesPending.current = true;
    api
      .lanes()
      .then(setLanes, (e) => setError(asUiError(e)))
      .finally(() => {
        lanesPending.current = false;
      });
  }, []);

  const onGpu = useCallback((e: GpuEvent) => {
    setGpu(e.status);
    const latest = e.latest;
    if (latest) {
      setGpuPoints((pts) =>
        pts.length > 0 && pts[pts.length - 1].at >= latest.at_ms
          ? pts
          : [...pts.slice(-(GPU_POINTS - 1)), toPoint(latest)],
      );
    }
  }, []);

  useEvent("lane", refreshLanes);
  useEvent("gpu", onGpu);

  useEffect(() => {
    Promise.all([api.appInfo().then(setInfo), api.listProjects().then(setEntries), api.lanes().then(setLanes)])
      .then(() =>
        api.gpuStatus().then((view) => {
          setGpu(view.status);
          setGpuPoints(view.samples.map(toPoint));
        }),
      )
      .catch((e) => setError(asUiError(e)))
      .finally(() => {
        document.body.dataset.ready = "true";
        api.appReady().then((ms) => {
          document.body.dataset.coldStartMs = String(ms);
        });
      });
  }, []);

  // A changed view is announced by its heading taking the focus.
  useFocusHeadingOn(view);

  const openProject = (p: Project) => {
    setProject(p);
    announce(t("announce.projectOpened", { name: p.name }));
    if (view === "projects") setView("transcribe");
  };

  const onProject = (p: Project) => {
    setProject(p);
    refreshProjects();
  };
  // A typed edit answers with its segment alone; it goes into the project shown now (another
  // save may have landed meanwhile), and the project list is not fetched again for it.
  const onSegmentSaved = useCallback((id: string, saved: SegmentSaved) => {
    setProject((p) => (p === null || p.id !== id ? p : withSavedSegment(p, saved)));
  }, []);

  return (
    <div class="layout">
      <nav class="sidebar" aria-label={t("nav.label")}>
        <div class="brand">{t("app.name")}</div>
        {project && (
          <div class="current-project" data-testid="current-project-name" title={project.id}>
            {project.name}
          </div>
        )}
        {VIEWS.map((v) => (
          <button
            key={v.id}
            class={view === v.id ? "nav active" : "nav"}
            data-testid={`nav-${v.id}`}
            aria-current={view === v.id ? "page" : undefined}
            disabled={v.needsProject && !project}
            title={v.needsProject && !project ? t("nav.needsProject") : undefined}
            onClick={() => {
              setView(v.id);
              // Projects made elsewhere (the command line, a copied folder) show when the list does.
              if (v.id === "projects") refreshProjects();
            }}
          >
            {t(v.label)}
          </button>
        ))}
      </nav>
      <main class="content">
        {error && <ErrorNotice scope="app" error={error} onDismiss={() => setError(null)} />}
        <InterruptedJobs
          onResumed={(id) => {
            refreshProjects();
            if (project?.id === id) api.openProject(id).then(setProject, (e) => setError(asUiError(e)));
          }}
        />
        {view === "projects" && (
          <ProjectsView
            entries={entries}
            current={project}
            projectsDir={info?.projects_dir ?? ""}
            onOpen={openProject}
            onCurrentChanged={onProject}
            onChanged={refreshProjects}
            onDeleted={(id) => {
              if (project?.id === id) setProject(null);
              refreshProjects();
            }}
          />
        )}
        {view === "transcribe" && project && (
          <TranscribeView project={project} onProject={onProject} onSegmentSaved={onSegmentSaved} />
        )}
        {view === "cleanup" && project && (
          <CleanupView project={project} onProject={onProject} onOpenSettings={() => setView("settings")} />
        )}
        {view === "synthesize" && project && <SynthesizeView project={project} onProject={onProject} />}
        {view === "narration" && project && <NarrationView project={project} onProject={onProject} />}
        {view === "voices" && <VoicesView />}
        {view === "settings" && <SettingsView info={info} onSaved={refreshLanes} />}
      </main>
      <Announcer />
      <aside class="side">
        <LanesPanel lanes={lanes} />
        <GpuPanel status={gpu} points={gpuPoints} />
        <MemoryPanel />
      </aside>
    </div>
  );
}

// A script error must be visible (and fail UI automation), never a silently frozen window.
function showCrash(message: string) {
  let box = document.querySelector<HTMLElement>("[data-testid='app-crash']");
  if (!box) {
    box = document.createElement("div");
    box.dataset.testid = "app-crash";
    box.className = "notice error crash";
    box.setAttribute("role", "alert");
    document.body.prepend(box);
  }
  box.textContent = t("app.crash", { message });
}
window.addEventListener("error", (e) => showCrash(e.message));
window.addEventListener("unhandledrejection", (e) => showCrash(asUiError(e.reason).message));

render(<App />, document.getElementById("app")!);

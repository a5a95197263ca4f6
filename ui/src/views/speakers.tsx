// Speakers: who speaks in the project, as transcribing with speakers found them. Rename a
// speaker (everywhere: segments name speakers by id), merge two, "this is <profile>" (attach a
// speaker to a voice profile, whose name and voice it then takes), and make a voice profile
// from a speaker's clean turns. Every edit says what the view showed, so a stale view is
// refused as changed elsewhere and reloads instead of undoing another window's change.
import { useEffect, useState } from "preact/hooks";
import { api, asUiError, type Project, type Speaker, type UiError, type VoiceProfile } from "../api";
import { useJob } from "../hooks";
import { editProject } from "../project";
import { formatNumber, formatSeconds, t } from "../i18n";
import { ErrorNotice } from "../rejection";
import { SPEAKER_COLORS } from "../waveform";

/** The name shown for a speaker: theirs, else "Speaker N" from the label. */
export function displayName(speaker: Speaker): string {
  if (speaker.name) return speaker.name;
  const n = speaker.id.match(/^S(\d+)$/);
  return n ? t("speakers.default", { n: n[1] }) : speaker.id;
}

/** A speaker's name by id, for segments. */
export function speakerName(project: Project, id: string | null | undefined): string | null {
  if (!id) return null;
  const speaker = (project.speakers ?? []).find((s) => s.id === id);
  return speaker ? displayName(speaker) : id;
}

/** A speaker's colour: by their place in the project's list (as on the lanes). */
export function speakerColor(project: Project, id: string): string {
  const k = Math.max(
    (project.speakers ?? []).findIndex((s) => s.id === id),
    0,
  );
  return SPEAKER_COLORS[k % SPEAKER_COLORS.length];
}

/** A choice of one of `speakers` by name; `id` is also its test id. */
function SpeakerChoice(props: {
  id: string;
  speakers: Speaker[];
  value: string;
  onChange: (id: string) => void;
}) {
  return (
    <select
      id={props.id}
      data-testid={props.id}
      value={props.value}
      onChange={(e) => props.onChange((e.target as HTMLSelectElement).value)}
    >
      {props.speakers.map((s) => (
        <option key={s.id} value={s.id}>
          {displayName(s)}
        </option>
      ))}
    </select>
  );
}

export function SpeakersPanel(props: { project: Project; onProject: (p: Project) => void }) {
  const { project } = props;
  const [profiles, setProfiles] = useState<VoiceProfile[]>([]);
  const [drafts, setDrafts] = useState<Record<string, string>>({});
  const [mergeFrom, setMergeFrom] = useState("");
  const [mergeInto, setMergeInto] = useState("");
  // The profile last made from a speaker (shown in the language of the moment).
  const [made, setMade] = useState<{ name: string; turns: number; seconds: number } | null>(null);
  const [error, setError] = useState<UiError | null>(null);
  const making = useJob("speaker-profile");
  const speakers = project.speakers ?? [];

  useEffect(() => {
    api.voiceProfiles().then(setProfiles, (e) => setError(asUiError(e)));
  }, [project.id, project.modified_unix_ms]);
  useEffect(() => {
    // A merge choice that no longer names a speaker is cleared.
    if (!speakers.some((s) => s.id === mergeFrom)) setMergeFrom(speakers[1]?.id ?? "");
    if (!speakers.some((s) => s.id === mergeInto)) setMergeInto(speakers[0]?.id ?? "");
  }, [speakers.map((s) => s.id).join(",")]);

  /** Runs an edit; a stale view is reloaded so the user sees what was saved elsewhere. */
  const edit = async (work: () => Promise<Project>) => {
    setError(null);
    setMade(null);
    try {
      await editProject(project.id, work, props.onProject);
    } catch (e) {
      setError(asUiError(e));
    }
  };

  if (speakers.length === 0) return null;
  return (
    <section class="speakers-panel" data-testid="speakers-panel" aria-label={t("transcribe.speakers")}>
      <h2>{t("speakers.heading", { count: speakers.length })}</h2>
      {speakers.map((s) => (
        <div class="speaker-row" key={s.id} data-testid={`speaker-${s.id}`}>
          <span class="swatch" style={{ background: speakerColor(project, s.id) }} aria-hidden="true" />
          <span class="speaker-name" data-testid={`speaker-name-${s.id}`}>
            {displayName(s)}
          </span>
          <span class="muted" data-testid={`speaker-seconds-${s.id}`}>
            {[
              s.id,
              formatSeconds(s.seconds),
              s.similarity !== null &&
                s.similarity !== undefined &&
                t("speakers.recognised", { similarity: formatNumber(s.similarity, 2) }),
            ]
              .filter((part) => !!part)
              .join(" · ")}
          </span>
          <span class="grow" />
          <form
            class="row"
            onSubmit={(e) => {
              e.preventDefault();
              const name = drafts[s.id] ?? s.name ?? "";
              edit(() => api.renameSpeaker(project.id, s.id, name, speakers)).then(() =>
                setDrafts(({ [s.id]: _done, ...rest }) => rest),
              );
            }}
          >
            <input
              data-testid={`speaker-rename-${s.id}`}
              aria-label={t("speakers.nameOf", { name: displayName(s) })}
              placeholder={displayName(s)}
              value={drafts[s.id] ?? s.name ?? ""}
              onInput={(e) => {
                const value = (e.target as HTMLInputElement).value;
                setDrafts((d) => ({ ...d, [s.id]: value }));
              }}
            />
            <button type="submit" data-testid={`speaker-rename-save-${s.id}`}>
              {t("common.rename")}
            </button>
          </form>
          <label for={`speaker-profile-${s.id}`}>{t("speakers.thisIs")}</label>
          <select
            id={`speaker-profile-${s.id}`}
            data-testid={`speaker-profile-${s.id}`}
            value={s.profile ?? ""}
            onChange={(e) => {
              const profile = (e.target as HTMLSelectElement).value;
              edit(() => api.attachSpeaker(project.id, s.id, profile === "" ? null : profile, speakers));
            }}
          >
            <option value="">{t("speakers.noProfile")}</option>
            {profiles.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </select>
          <button
            data-testid={`speaker-create-profile-${s.id}`}
            disabled={making.running !== null}
            title={t("speakers.makeTitle")}
            onClick={async () => {
              setError(null);
              setMade(null);
              try {
                const result = await making.run((job) =>
                  api.profileFromSpeaker(project.id, s.id, drafts[s.id] || null, job),
                );
                props.onProject(result.project);
                setProfiles(await api.voiceProfiles());
                setMade({ name: result.voice.name, turns: result.segments.length, seconds: result.seconds });
              } catch (e) {
                setError(asUiError(e));
              }
            }}
          >
            {t("speakers.make")}
          </button>
        </div>
      ))}
      {speakers.length > 1 && (
        <div class="row" data-testid="speaker-merge-row">
          <label for="speaker-merge-from">{t("speakers.merge")}</label>
          <SpeakerChoice
            id="speaker-merge-from"
            speakers={speakers}
            value={mergeFrom}
            onChange={setMergeFrom}
          />
          <label for="speaker-merge-into">{t("speakers.into")}</label>
          <SpeakerChoice
            id="speaker-merge-into"
            speakers={speakers}
            value={mergeInto}
            onChange={setMergeInto}
          />
          <button
            data-testid="speaker-merge"
            disabled={mergeFrom === "" || mergeFrom === mergeInto}
            onClick={() => edit(() => api.mergeSpeakers(project.id, mergeFrom, mergeInto, speakers))}
          >
            {t("speakers.merge")}
          </button>
          <span class="muted">{t("speakers.mergeNote")}</span>
        </div>
      )}
      {made && (
        <p class="ok" data-testid="speaker-profile-made">
          {t("speakers.made", { name: made.name, count: made.turns, seconds: formatSeconds(made.seconds) })}
        </p>
      )}
      {error && <ErrorNotice scope="speakers" error={error} onDismiss={() => setError(null)} />}
    </section>
  );
}

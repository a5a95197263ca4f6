// Consent for a voice profile's cloning server: a take in a profile sends the text and the
// profile's reference clips to the cloning server. On this machine that needs nothing; on
// another, the project must allow that server, and this says exactly what goes where.
import { useEffect, useState } from "preact/hooks";
import { api, asUiError, type Project, type TextDestination } from "../api";
import { useGuarded } from "../hooks";
import { saveProjectSettings } from "../project";
import { tr } from "../i18n";
import { ErrorNotice } from "../rejection";

export function VoiceConsent(props: { project: Project; voice: string | null; onProject: (p: Project) => void }) {
  const { project, voice } = props;
  const [destination, setDestination] = useState<TextDestination | null>(null);
  const { error, setError, guard } = useGuarded();
  useEffect(() => {
    api.voiceDestination(project.id).then(setDestination, (e) => setError(asUiError(e)));
  }, [project.id, project.settings.remote_voice_allowed]);
  if (!voice?.startsWith("profile:") || !destination || destination.on_this_machine) return null;
  const allow = (allowed: boolean) =>
    guard(async () => {
      await saveProjectSettings(project, { remote_voice_allowed: allowed ? destination.origin : null }, props.onProject);
    });
  return (
    <div class="row" data-testid="voice-destination">
      <label class="toggle">
        <input
          type="checkbox"
          data-testid="setting-remote-voice-consent"
          checked={destination.allowed}
          onChange={(e) => allow((e.target as HTMLInputElement).checked)}
        />
        {tr("consent.voice", {
          url: <code data-testid="voice-destination-url">{destination.url}</code>,
          host: destination.host,
        })}
      </label>
      {error && <ErrorNotice scope="voice-consent" error={error} onDismiss={() => setError(null)} />}
    </div>
  );
}

"""The official openai Python client asking `headroom serve` who spoke when.

Run by crates/headroom-cli/tests/speakers.rs with the server's base URL, a two-speaker
conversation (WAV), a reference recording of one of its voices (another sentence, WAV), the
name to give that voice, and the name of a voice profile the server has (of the other
voice). Prints one JSON object with what it observed; exits non-zero
when the client's view is wrong.
"""

import base64
import json
import pathlib
import sys

import openai
from openai import OpenAI

base_url, conversation, reference, name, profile = sys.argv[1:6]
conversation, reference = pathlib.Path(conversation), pathlib.Path(reference)
client = OpenAI(base_url=base_url, api_key="not-needed-for-loopback", max_retries=0, timeout=300)
result = {}


def segments(diarized):
    return [
        {"type": s.type, "id": s.id, "start": s.start, "end": s.end, "text": s.text, "speaker": s.speaker}
        for s in diarized.segments
    ]


# Who spoke when, as the diarizing model is asked (chunking_strategy as its docs require).
with conversation.open("rb") as f:
    diarized = client.audio.transcriptions.create(
        model="gpt-4o-transcribe-diarize",
        file=f,
        response_format="diarized_json",
        chunking_strategy="auto",
    )
assert type(diarized).__name__ == "TranscriptionDiarized", type(diarized)
assert diarized.task == "transcribe"
result["text"] = diarized.text
result["duration"] = diarized.duration
result["usage_seconds"] = diarized.usage.seconds if diarized.usage else None
result["segments"] = segments(diarized)

# A known speaker: its name and a reference recording as a data URL, through the client's
# own parameters.
data_url = "data:audio/wav;base64," + base64.b64encode(reference.read_bytes()).decode()
with conversation.open("rb") as f:
    named = client.audio.transcriptions.create(
        model="gpt-4o-transcribe-diarize",
        file=f,
        response_format="diarized_json",
        chunking_strategy={"type": "server_vad", "threshold": 0.5},
        known_speaker_names=[name],
        known_speaker_references=[data_url],
    )
result["named_segments"] = segments(named)

# A voice profile's name works as a known speaker without a reference.
with conversation.open("rb") as f:
    by_profile = client.audio.transcriptions.create(
        model="gpt-4o-transcribe-diarize",
        file=f,
        response_format="diarized_json",
        known_speaker_names=[profile],
    )
result["profile_segments"] = segments(by_profile)

# Speakers asked for in verbose_json: segments and words carry them.
with conversation.open("rb") as f:
    verbose = client.audio.transcriptions.create(
        model="whisper-1",
        file=f,
        response_format="verbose_json",
        timestamp_granularities=["word"],
        extra_body={"speakers": "2"},
    )
result["verbose_speakers"] = [s.speaker for s in verbose.segments]
result["verbose_word_speakers"] = [w.speaker for w in verbose.words or []]

# Plain json still answers only the text.
with conversation.open("rb") as f:
    plain = client.audio.transcriptions.create(model="whisper-1", file=f)
result["plain_text"] = plain.text


def refused(**kwargs):
    try:
        with conversation.open("rb") as f:
            client.audio.transcriptions.create(
                model="whisper-1", file=f, response_format="diarized_json", **kwargs
            )
    except openai.BadRequestError as e:
        return {"status": e.status_code, "code": e.code, "message": e.message}
    raise SystemExit(f"expected BadRequestError for {kwargs}")


result["not_a_data_url"] = refused(
    known_speaker_names=["Ann"], known_speaker_references=["https://example.com/ann.wav"]
)
result["not_audio"] = refused(
    known_speaker_names=["Ann"],
    known_speaker_references=["data:audio/wav;base64," + base64.b64encode(b"not audio" * 50).decode()],
)
result["unknown_name"] = refused(known_speaker_names=["Nobody Here"])
result["too_many"] = refused(
    known_speaker_names=["a", "b", "c", "d", "e"],
    known_speaker_references=[data_url] * 5,
)
result["bad_speakers"] = refused(extra_body={"speakers": "eleven"})

print(json.dumps(result))

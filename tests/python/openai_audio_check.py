"""The official openai Python client against `headroom serve`'s audio endpoints.

Run by tests/tests/serve_audio.rs with the server's base URL and a scratch directory.
Prints one JSON object with what it observed; exits non-zero when the client's view is wrong.
"""

import json
import pathlib
import sys

import openai
from openai import OpenAI

base_url, scratch = sys.argv[1], pathlib.Path(sys.argv[2])
client = OpenAI(base_url=base_url, api_key="not-needed-for-loopback", max_retries=0, timeout=300)
result = {}

speech = client.audio.speech.create(
    model="tts-1",
    voice="alloy",
    input="Please send the report to my office before noon.",
    response_format="wav",
)
wav = scratch / "speech.wav"
wav.write_bytes(speech.content)
assert speech.content[:4] == b"RIFF", "speech is not a WAV file"
result["speech_bytes"] = len(speech.content)

with wav.open("rb") as f:
    plain = client.audio.transcriptions.create(model="whisper-1", file=f)
result["text"] = plain.text

with wav.open("rb") as f:
    srt = client.audio.transcriptions.create(model="whisper-tiny.en", file=f, response_format="srt")
result["srt"] = srt

with wav.open("rb") as f:
    verbose = client.audio.transcriptions.create(
        model="whisper-tiny.en", file=f, response_format="verbose_json"
    )
result["verbose_language"] = verbose.language
result["verbose_segments"] = len(verbose.segments or [])

with wav.open("rb") as f:
    timed = client.audio.transcriptions.create(
        model="whisper-tiny.en", file=f, response_format="verbose_json",
        timestamp_granularities=["word"],
    )
words = timed.words or []
result["words"] = len(words)
result["words_in_order"] = all(
    a.start <= b.start and a.start <= a.end for a, b in zip(words, words[1:])
)

bad = scratch / "notes.mp3"
bad.write_text("meeting notes, not audio\n" * 40)
try:
    with bad.open("rb") as f:
        client.audio.transcriptions.create(model="whisper-1", file=f)
    raise SystemExit("expected BadRequestError for a file that is not audio")
except openai.BadRequestError as e:
    result["bad_status"] = e.status_code
    result["bad_code"] = e.code
    result["bad_message"] = e.message

print(json.dumps(result))

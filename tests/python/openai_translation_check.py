"""The official openai Python client translates Spanish speech into English through `headroom serve`.

Run by tests/tests/serve_audio.rs with the server's base URL and a Spanish recording. Prints one
JSON object with what it observed; exits non-zero when the client's view is wrong.
"""

import json
import sys

import openai
from openai import OpenAI

base_url, recording = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=base_url, api_key="not-needed-for-loopback", max_retries=0, timeout=300)
result = {}

with open(recording, "rb") as f:
    result["text"] = client.audio.translations.create(model="whisper-1", file=f).text
with open(recording, "rb") as f:
    verbose = client.audio.translations.create(
        model="whisper-1", file=f, response_format="verbose_json"
    )
    result["verbose_task"] = verbose.task
    result["verbose_language"] = verbose.language
    result["verbose_segments"] = len(verbose.segments or [])
with open(recording, "rb") as f:
    result["srt"] = client.audio.translations.create(model="whisper-1", file=f, response_format="srt")
# An English-only model never learned to translate: refused, naming one that can.
with open(recording, "rb") as f:
    try:
        client.audio.translations.create(model="whisper-tiny.en", file=f)
        raise SystemExit("expected BadRequestError for an English-only model")
    except openai.BadRequestError as e:
        result["english_only"] = {"status": e.status_code, "code": e.code, "message": e.message}
print(json.dumps(result))

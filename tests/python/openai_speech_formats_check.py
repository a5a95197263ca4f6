"""The official openai Python client speaks Kokoro through `headroom serve` in every format.

Run by tests/tests/serve_audio.rs with the server's base URL and a scratch directory. Each file
the client saves is read by ffprobe. Prints one JSON object with what it observed; exits non-zero
when the client's view is wrong.
"""

import json
import pathlib
import subprocess
import sys

import openai
from openai import OpenAI

base_url, scratch = sys.argv[1], pathlib.Path(sys.argv[2])
client = OpenAI(base_url=base_url, api_key="not-needed-for-loopback", max_retries=0, timeout=300)
TEXT = "Please send the report to my office before noon."
result = {}


def ffprobe(path):
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_streams", "-show_format", "-of", "json", str(path)],
        capture_output=True, text=True, check=True,
    )
    probed = json.loads(out.stdout)
    stream = probed["streams"][0]
    return {
        "codec": stream["codec_name"],
        "sample_rate": int(stream["sample_rate"]),
        "channels": stream["channels"],
        "duration": float(probed["format"]["duration"]),
        "format": probed["format"]["format_name"],
    }


def speak(path, **options):
    # The client's file helper, as its documentation shows.
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=TEXT, **options
    ) as response:
        content_type = response.headers.get("content-type")
        response.stream_to_file(path)
    return content_type


# mp3 is the client's default: no response_format sent.
for name, options in [
    ("mp3", {}),
    ("opus", {"response_format": "opus"}),
    ("flac", {"response_format": "flac"}),
    ("wav", {"response_format": "wav"}),
]:
    path = scratch / f"speech.{name}"
    content_type = speak(path, **options)
    result[name] = {"content_type": content_type, **ffprobe(path)}

# pcm: raw 24 kHz 16-bit mono, no header; at twice the speed, about half as long.
for name, speed in [("pcm", 1.0), ("pcm_fast", 2.0)]:
    speech = client.audio.speech.create(
        model="tts-1", voice="kokoro", input=TEXT, response_format="pcm", speed=speed
    )
    result[name] = {
        "content_type": speech.response.headers.get("content-type"),
        "bytes": len(speech.content),
        "starts_with_riff": speech.content[:4] == b"RIFF",
    }

for name, options in [
    ("bad_format", {"response_format": "ogg"}),
    ("aac", {"response_format": "aac"}),
    ("bad_speed", {"speed": 5.0}),
    ("instructions", {"instructions": "Speak like a pirate."}),
]:
    try:
        client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, **options)
        raise SystemExit(f"expected BadRequestError for {options}")
    except openai.BadRequestError as e:
        result[name] = {"status": e.status_code, "code": e.code, "message": e.message}

print(json.dumps(result))

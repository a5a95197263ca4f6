"""The official openai Python client streams a long text from `headroom serve`.

Run by tests/tests/serve_audio.rs with the server's base URL. Asks for eight sentences of Kokoro
three ways: raw PCM read as it arrives (`with_streaming_response` and `iter_bytes`), MP3 the same
way, and `stream_format="sse"` events. Prints one JSON object with what it observed (times in
seconds from the request, chunk counts, the audio's length); exits non-zero when the client's
view is wrong.
"""

import base64
import json
import sys
import time

from openai import OpenAI

base_url = sys.argv[1]
client = OpenAI(base_url=base_url, api_key="not-needed-for-loopback", max_retries=0, timeout=300)
TEXT = " ".join(
    [
        "The river was quiet that morning.",
        "A heron stood in the shallows, waiting.",
        "Across the water, the town was waking up.",
        "Shops opened their shutters one by one.",
        "A baker carried bread out to a waiting van.",
        "Children ran along the bridge toward the school.",
        "By nine o'clock the streets were full of people.",
        "And the heron, at last, flew away.",
    ]
)
result = {}


def timed_stream(response_format):
    started = time.monotonic()
    first, chunks, data = None, 0, bytearray()
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=TEXT, response_format=response_format
    ) as response:
        content_type = response.headers.get("content-type")
        for chunk in response.iter_bytes():
            if chunk and first is None:
                first = time.monotonic() - started
            chunks += 1
            data.extend(chunk)
    return {
        "content_type": content_type,
        "first_audio_s": first,
        "total_s": time.monotonic() - started,
        "chunks": chunks,
        "bytes": len(data),
    }, bytes(data)


result["pcm"], pcm = timed_stream("pcm")
result["pcm"]["audio_s"] = len(pcm) / 2 / 24000
result["mp3"], mp3 = timed_stream("mp3")
result["mp3"]["starts_like_mp3"] = mp3[:1] == b"\xff" or mp3[:3] == b"ID3"

# SSE: speech.audio.delta events with base64 audio, then speech.audio.done.
started = time.monotonic()
events, first = [], None
with client.audio.speech.with_streaming_response.create(
    model="tts-1", voice="alloy", input=TEXT, response_format="pcm", stream_format="sse"
) as response:
    result["sse_content_type"] = response.headers.get("content-type")
    for line in response.iter_lines():
        if not line.startswith("data: "):
            continue
        event = json.loads(line[len("data: "):])
        if event["type"] == "speech.audio.delta" and first is None:
            first = time.monotonic() - started
        events.append(event)
audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
result["sse"] = {
    "types": [e["type"] for e in events],
    "first_audio_s": first,
    "total_s": time.monotonic() - started,
    "audio_s": len(audio) / 2 / 24000,
    "done": events[-1] if events else None,
}
print(json.dumps(result))

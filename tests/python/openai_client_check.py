"""The official openai Python client against `headroom serve`.

Run by tests/tests/openai_python.rs with the server's base URL and, optionally, how many
slots its text lane has (default 2: one llama-server; 4 for a fleet of two). Prints one JSON
object with what it observed; exits non-zero (with the reason) when the client's view is wrong.
"""

import json
import sys
import urllib.request

import openai
from openai import OpenAI

base_url = sys.argv[1]
slots = int(sys.argv[2]) if len(sys.argv) > 2 else 2
# max_retries=0: the client would otherwise honour Retry-After and hide the 429.
client = OpenAI(base_url=base_url, api_key="not-needed-for-loopback", max_retries=0, timeout=120)
result = {}

# Streamed text on success.
stream = client.chat.completions.create(
    model="smollm2",
    messages=[{"role": "user", "content": "Say hello in five words."}],
    max_tokens=16,
    temperature=0,
    stream=True,
)
streamed = "".join(
    chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices
)
assert streamed.strip(), "the stream carried no text"
result["streamed_text"] = streamed

# A plain completion.
reply = client.chat.completions.create(
    model="smollm2",
    messages=[{"role": "user", "content": "Say hello."}],
    max_tokens=8,
    temperature=0,
)
assert reply.choices[0].message.content.strip(), "the completion had no text"
result["completion_text"] = reply.choices[0].message.content

# Overload: hold every slot with long streams, then one more request.
holders = []
for _ in range(slots):
    held = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Write a long story about a lighthouse."}],
        max_tokens=2048,
        stream=True,
    )
    iterator = iter(held)
    while True:
        chunk = next(iterator)
        if chunk.choices and chunk.choices[0].delta.content:
            break
    holders.append(held)
# Where the held streams run, as Headroom's lanes endpoint says: in flight per upstream.
with urllib.request.urlopen(base_url + "/headroom/lanes", timeout=10) as lanes:
    upstreams = json.load(lanes)["text"].get("upstreams", [])
result["held_per_upstream"] = [u["in_flight"] for u in upstreams]
try:
    client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "hi"}], max_tokens=8
    )
    raise SystemExit(f"expected RateLimitError while all {slots} slots were held")
except openai.RateLimitError as e:
    result["overload_status"] = e.status_code
    result["overload_code"] = e.code
    result["overload_retry_after"] = e.response.headers.get("retry-after")
    result["overload_message"] = e.message
finally:
    for held in holders:
        held.close()

# Oversized input: refused with a clear 400.
try:
    client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "word " * 20000}],
        max_tokens=8,
    )
    raise SystemExit("expected BadRequestError for oversized input")
except openai.BadRequestError as e:
    result["oversized_status"] = e.status_code
    result["oversized_code"] = e.code

print(json.dumps(result))

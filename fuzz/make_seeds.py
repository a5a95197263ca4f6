#!/usr/bin/env python3
"""Writes the seed inputs of fuzz/corpus/<target>/seed-*: small valid inputs per fuzz target.

Run from anywhere: `python3 fuzz/make_seeds.py`. The audio seeds need ffmpeg; without it they
are left as they are. libFuzzer adds its own finds next to the seeds (named by their SHA-1).
"""

import json
import pathlib
import shutil
import struct
import subprocess
import tempfile

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(data if isinstance(data, bytes) else data.encode())


# ---- sse: one byte (how the body is cut into reads: 0 = whole), then the body ----------------
def chunk(content=None, finish=None, role=None, usage=None, model="m"):
    delta = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    value = {"id": "c1", "object": "chat.completion.chunk", "model": model,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        value["usage"] = usage
        value["choices"] = []
    return "data: " + json.dumps(value) + "\n\n"


stream = (chunk(role="assistant", content="") + chunk(content="Hello") + chunk(content=" wörld")
          + chunk(finish="stop")
          + chunk(usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7})
          + "data: [DONE]\n\n")
write("sse", "stream", b"\x00" + stream.encode())
write("sse", "stream-cut-3", b"\x03" + stream.encode())
write("sse", "crlf-comments", b"\x07" + (": keep-alive\r\n\r\nevent: message\r\nid: 1\r\nretry: 10\r\n"
      + chunk(content="x").replace("\n", "\r\n") + "data: [DONE]\r\n\r\n").encode())
write("sse", "error", b"\x00" + ('data: {"error": {"message": "overloaded", "type": "server_error", '
      '"code": 503}}\n\n').encode())
write("sse", "truncated", b"\x00" + chunk(content="partial").encode())
write("sse", "multiline-data", b"\x00" + b'data: {"choices":\ndata: [{"delta":{"content":"a"},'
      b'"finish_reason":"length"}]}\n\n')
write("sse", "bom-not-json", b"\x01" + "\ufeffdata: nope\n\n".encode())

# ---- ct2_model: a model.bin, version 6 -------------------------------------------------------
def name(s):
    b = s.encode() + b"\0"
    return struct.pack("<H", len(b)) + b


def var(n, dims, dtype, raw):
    return (name(n) + bytes([len(dims)]) + b"".join(struct.pack("<I", d) for d in dims)
            + bytes([dtype]) + struct.pack("<I", len(raw)) + raw)


def model(version, variables, aliases=()):
    out = struct.pack("<I", version) + name("WhisperSpec") + struct.pack("<I", 3)
    out += struct.pack("<I", len(variables)) + b"".join(variables)
    out += struct.pack("<I", len(aliases)) + b"".join(name(a) + name(t) for a, t in aliases)
    return out


f32 = lambda *v: struct.pack(f"<{len(v)}f", *v)
write("ct2_model", "f32-f16-bf16", model(6, [
    var("encoder/conv1/weight", [2, 2], 0, f32(1, 2, 3, 4)),
    var("decoder/embeddings/weight", [3], 4, struct.pack("<3e", 0.5, -1, 2)),
    var("decoder/layer_norm/gamma", [1, 2], 5, bytes([0x80, 0x3f, 0x00, 0x40])),
    var("encoder/num_heads", [], 3, struct.pack("<i", 6)),
    var("decoder/num_heads", [], 2, struct.pack("<h", 6)),
    var("flag", [], 1, b"\x01"),
    var("scale", [], 0, f32(0.5)),
], aliases=[("decoder/embeddings/alias", "decoder/embeddings/weight")]))
write("ct2_model", "v5-no-aliases", model(5, [var("w", [1, 1, 2], 0, f32(1, 2))])[:-4])
write("ct2_model", "int8", model(6, [var("q", [2], 1, b"\x01\x02")]))

# ---- project_manifest: project.json ----------------------------------------------------------
project = {
    "format": 1, "id": "interview", "name": "Interview", "created_unix_ms": 1700000000000,
    "modified_unix_ms": 1700000100000,
    "settings": {"llm_cleanup": True, "failure_policy": "fallback", "cleanup_mode": "rewrite",
                 "server_url": "http://127.0.0.1:8000/v1", "voice": "en-us"},
    "source_audio": "audio/interview.flac", "language": "en", "duration_secs": 12.5,
    "segments": [
        {"start": 0.0, "end": 4.2, "text": "so um we started in 2019"},
        {"start": 4.2, "end": 9.0, "text": "uh it was hard",
         "suggestion": {"text": "It was hard.", "source": "llm", "decision": "accepted"}},
        {"start": 9.0, "end": 12.5, "text": "you know",
         "suggestion": {"text": "", "source": "rule_based", "note": "overloaded"}},
    ],
    "speech": [{"file": "speech/take-1.wav", "voice": "joe", "segment": 1,
                "duration_secs": 1.5, "created_unix_ms": 1700000200000}],
}
write("project_manifest", "full", json.dumps(project, indent=2))
write("project_manifest", "minimal", json.dumps({k: project[k] for k in
      ["format", "id", "name", "created_unix_ms", "modified_unix_ms"]}))
write("project_manifest", "newer", json.dumps(dict(project, format=2)))

# ---- config: config.toml ---------------------------------------------------------------------
write("config", "full", """[llm]
url = "http://127.0.0.1:8000/v1"
model = "Qwen/Qwen2.5-7B-Instruct"
api_key = "sk-local"

[text_lane]
max_in_flight = 4
max_waiting = 16
context_tokens = 8192
max_input_chars = 20000
max_tokens = 1024
queue_wait_secs = 10.0
first_chunk_secs = 30
total_secs = 120.5
yield_to_audio = "preempt"
audio_headroom_mib = 2048

[audio_lane]
max_in_flight = 1
max_waiting = 8
queue_wait_secs = 5

[cleanup]
mode = "rewrite"
policy = "retry"
retry_attempts = 3

[server]
listen = "127.0.0.1:8089"
max_body_bytes = 1048576
max_upload_bytes = 209715200
max_concurrent_uploads = 4
allowed_origins = ["http://localhost:1420"]
""")
write("config", "small", '[llm]\nurl = "https://example.com/v1"\n\n[text_lane]\nmax_in_flight = 0\n')
write("config", "empty", "")

# ---- audio_decode: one byte (extension hint, 0x80: resample to 16 kHz), then the file -------
HINT = {"wav": 1, "mp3": 2, "flac": 3, "ogg": 4, "m4a": 5, "aac": 6, "mkv": 8, "webm": 9, "opus": 10}


def strip_flac_padding(d):
    pos, blocks = 4, []
    while True:
        h, ln = d[pos], int.from_bytes(d[pos + 1:pos + 4], "big")
        blocks.append((h & 0x7F, d[pos + 4:pos + 4 + ln]))
        pos += 4 + ln
        if h & 0x80:
            break
    keep = [b for b in blocks if b[0] != 1]
    out = b"fLaC"
    for i, (t, body) in enumerate(keep):
        out += bytes([t | (0x80 if i == len(keep) - 1 else 0)]) + len(body).to_bytes(3, "big") + body
    return out + d[pos:]


if shutil.which("ffmpeg"):
    sine = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=8000:duration=0.12"]
    jobs = [
        ("wav-s16", "wav", ["-ac", "1", "-c:a", "pcm_s16le"], "wav"),
        ("wav-f32-stereo", "wav", ["-ac", "2", "-c:a", "pcm_f32le"], "wav"),
        ("flac", "flac", ["-ac", "1"], "flac"),
        ("mp3", "mp3", ["-ac", "1", "-b:a", "8k"], "mp3"),
        ("ogg", "ogg", ["-ac", "1", "-c:a", "libvorbis", "-q:a", "0"], "ogg"),
        ("m4a", "m4a", ["-ac", "1", "-c:a", "aac", "-b:a", "16k"], "mp4"),
        ("aac", "aac", ["-ac", "1", "-c:a", "aac", "-b:a", "16k"], "adts"),
        ("mkv-flac", "mkv", ["-ac", "1", "-c:a", "flac"], "matroska"),
        ("mkv-pcm", "mkv", ["-ac", "1", "-c:a", "pcm_s16le"], "matroska"),
        ("webm-opus", "webm", ["-ac", "1", "-c:a", "libopus", "-b:a", "8k"], "webm"),
        ("webm-vorbis", "webm", ["-ac", "1", "-c:a", "libvorbis", "-q:a", "0"], "webm"),
        ("opus", "opus", ["-ac", "1", "-c:a", "libopus", "-b:a", "8k"], "ogg"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for label, ext, args, fmt in jobs:
            out = pathlib.Path(tmp) / f"{label}.{ext}"
            subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *sine, *args,
                            "-map_metadata", "-1", "-fflags", "+bitexact", "-f", fmt, str(out)],
                           check=True)
            data = out.read_bytes()
            if ext == "flac":
                data = strip_flac_padding(data)
            write("audio_decode", label, bytes([HINT[ext]]) + data)
        # the WAV again, hinted as nothing and resampled while decoding
        wav = (CORPUS / "audio_decode" / "seed-wav-s16").read_bytes()[1:]
        write("audio_decode", "wav-unhinted-16k", b"\x80" + wav)

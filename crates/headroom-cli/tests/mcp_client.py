"""Drives `headroom mcp` with the official MCP Python SDK (PyPI `mcp`), as an agent would.

Usage: mcp_client.py HEADROOM_BINARY SPEECH_WAV OUT_DIR PROJECT LONG_WAV

Launches the server over stdio (with this process's environment), lists its tools, and calls
them; prints one JSON object with what each call answered, for the Rust test to check.
"""

import asyncio
import json
import os
import sys

import anyio

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def answer(result):
    """A tool result as plain data: its error flag, text and structured content."""
    text = "".join(getattr(c, "text", "") for c in result.content)
    return {"is_error": result.is_error, "text": text, "structured": result.structured_content}


async def main():
    binary, speech, out_dir, project, long_speech = sys.argv[1:6]
    server = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    report = {}
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            report["tools"] = sorted(t.name for t in tools.tools)
            report["schemas"] = {t.name: t.input_schema for t in tools.tools}

            progress = []

            async def on_progress(done, total, message):
                progress.append({"progress": done, "total": total, "message": message})

            result = await session.call_tool(
                "transcribe", {"path": speech}, progress_callback=on_progress
            )
            report["transcribe"] = answer(result)
            report["transcribe_progress"] = list(progress)

            # A long transcription, cancelled once its first progress arrives: the client
            # sends notifications/cancelled and the server's job stops (its log says so).
            started = anyio.Event()

            async def on_started(done, total, message):
                started.set()

            async def long_call():
                await session.call_tool(
                    "transcribe", {"path": long_speech}, progress_callback=on_started
                )
                report["long_call_finished"] = True

            async with anyio.create_task_group() as group:
                group.start_soon(long_call)
                await started.wait()
                group.cancel_scope.cancel()
            report.setdefault("long_call_finished", False)

            result = await session.call_tool(
                "transcribe", {"path": speech, "format": "srt", "priority": "interactive"}
            )
            report["transcribe_srt"] = answer(result)

            result = await session.call_tool("transcribe", {"path": out_dir})
            report["transcribe_folder"] = answer(result)

            missing = os.path.join(out_dir, "missing.wav")
            result = await session.call_tool("transcribe", {"path": missing})
            report["transcribe_missing"] = answer(result)

            result = await session.call_tool("transcribe", {"path": speech, "speakers": "many"})
            report["transcribe_bad_speakers"] = answer(result)

            result = await session.call_tool("list_voices", {})
            report["list_voices"] = answer(result)

            for name, fmt in [("spoken.wav", None), ("spoken.mp3", None), ("spoken.flac", "flac")]:
                arguments = {
                    "text": "Hello from the model context protocol.",
                    "voice": "en-us",
                    "output": os.path.join(out_dir, name),
                }
                if fmt:
                    arguments["format"] = fmt
                result = await session.call_tool("speak", arguments)
                report["speak_" + name] = answer(result)

            result = await session.call_tool(
                "speak",
                {"text": "Hello.", "output": os.path.join(out_dir, "x.aac"), "format": "aac"},
            )
            report["speak_aac"] = answer(result)

            result = await session.call_tool(
                "speak",
                {"text": "Hello.", "output": os.path.join(out_dir, "x.ogg"), "format": "ogg"},
            )
            report["speak_ogg"] = answer(result)

            # An agent gets the bounds an HTTP client gets, and writes only what it was told to.
            again = os.path.join(out_dir, "again.wav")
            result = await session.call_tool("speak", {"text": "Once.", "voice": "en-us", "output": again})
            report["speak_again_first"] = answer(result)
            hostile = {
                "too_long": {"text": "word " * 1000, "output": os.path.join(out_dir, "long.wav")},
                "again": {"text": "Again.", "voice": "en-us", "output": again},
                "device": {"text": "Hi.", "output": "/dev/null", "format": "wav", "overwrite": True},
                "aac_extension": {"text": "Hi.", "output": os.path.join(out_dir, "y.aac")},
                "mismatch": {"text": "Hi.", "output": os.path.join(out_dir, "z.mp3"), "format": "wav"},
                "voice_path": {
                    "text": "Hi.",
                    "voice": "en-us+../../../../../../../etc/passwd",
                    "output": os.path.join(out_dir, "v.wav"),
                },
            }
            for name, arguments in hostile.items():
                result = await session.call_tool("speak", arguments)
                report["refused_" + name] = answer(result)
            result = await session.call_tool(
                "speak",
                {"text": "Again, and once more, and again.", "voice": "en-us", "output": again, "overwrite": True},
            )
            report["speak_overwrite"] = answer(result)

            result = await session.call_tool("list_projects", {})
            report["list_projects"] = answer(result)

            result = await session.call_tool("project_transcript", {"project": project})
            report["project_transcript"] = answer(result)

            result = await session.call_tool("project_transcript", {"project": "No Such"})
            report["project_missing"] = answer(result)

            progress.clear()
            result = await session.call_tool(
                "cleanup_project",
                {"project": project, "rules_only": True},
                progress_callback=on_progress,
            )
            report["cleanup_project"] = answer(result)
            report["cleanup_progress"] = list(progress)

            progress.clear()
            result = await session.call_tool(
                "narrate_project",
                {"project": project, "voice": "en-us", "mode": "cleanup"},
                progress_callback=on_progress,
            )
            report["narrate_project"] = answer(result)
            report["narrate_progress"] = list(progress)

            result = await session.call_tool(
                "edit_project", {"project": project, "cut_fillers": True, "max_pause": 0.3}
            )
            report["edit_project"] = answer(result)
            result = await session.call_tool(
                "edit_project", {"project": project, "strike": ["99:1"]}
            )
            report["edit_missing_word"] = answer(result)
            result = await session.call_tool("edit_project", {"project": project, "cut": ["5-2"]})
            report["edit_backwards"] = answer(result)
    json.dump(report, sys.stdout)


asyncio.run(main())

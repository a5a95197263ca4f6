"""Reads a cut list back with OpenTimelineIO, as a video editor's import would, and prints its
clips as JSON: for each clip of the first audio track, its source start and duration and its
start on the timeline, in frames at the given rate, and the media it points at.

Usage: otio_read.py FILE ADAPTER FPS   (ADAPTER: cmx_3600, fcp_xml, fcpx_xml or otio_json)
"""

import json
import sys

import opentimelineio as otio


def main():
    path, adapter, fps = sys.argv[1], sys.argv[2], float(sys.argv[3])
    extra = {"rate": fps} if adapter == "cmx_3600" else {}
    read = otio.adapters.read_from_file(path, adapter_name=adapter, **extra)
    if isinstance(read, otio.schema.SerializableCollection):
        read = list(read)[0]
    tracks = [t for t in read.tracks if t.kind == otio.schema.TrackKind.Audio] or list(read.tracks)
    clips = []
    for clip in tracks[0].find_clips():
        source = clip.source_range
        reference = clip.media_reference
        clips.append(
            {
                "source_in": source.start_time.rescaled_to(fps).value,
                "frames": source.duration.rescaled_to(fps).value,
                "record_in": clip.range_in_parent().start_time.rescaled_to(fps).value,
                "media": getattr(reference, "target_url", None) or clip.name,
            }
        )
    print(json.dumps({"tracks": len(read.tracks), "clips": clips}))


if __name__ == "__main__":
    main()

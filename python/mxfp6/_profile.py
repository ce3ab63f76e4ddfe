"""MXFP6_PROFILE=DIR: a Chrome-trace JSON of every op launched (op, plan, resolution rule, key, GPU
time), written to DIR/mxfp6-PID.json when the process exits; open it in Perfetto
(ui.perfetto.dev) or chrome://tracing. Off by default: without the variable nothing is recorded
and a launch pays one attribute test.

GPU time comes from a pair of CUDA events around each op's launches on its stream; they are read
only at exit, so profiling adds no synchronization to the run. Launches captured into a CUDA graph
are listed with no GPU time (events cannot be timed inside a capture).
"""

import atexit
import json
import os
import time

DIR = os.environ.get("MXFP6_PROFILE") or None
enabled = DIR is not None
_spans = []
_origin = None  # (event, host µs) of the first span: GPU times are placed relative to it


def begin(stream):
    import torch
    capturing = torch.cuda.is_current_stream_capturing()
    start = None
    if not capturing:
        start = torch.cuda.Event(enable_timing=True)
        start.record(stream)
    return {"start": start, "host_us": time.perf_counter() * 1e6, "capturing": capturing}


def end(span, stream, public, op):
    import torch
    global _origin
    if span["start"] is not None:
        span["end"] = torch.cuda.Event(enable_timing=True)
        span["end"].record(stream)
        if _origin is None:
            _origin = (span["start"], span["host_us"])
    span.update(op=public, key=op.key, rule=op.rule, plan=op.plan(), stream=stream.cuda_stream)
    _spans.append(span)


def trace():
    """The recorded spans as Chrome-trace events (synchronizes the device to read the events)."""
    import torch
    if _spans:
        torch.cuda.synchronize()
    events, pid = [], os.getpid()
    for s in _spans:
        args = {"key": s["key"], "plan": s["plan"], "rule": s["rule"]}
        if s["start"] is not None:
            ts = _origin[1] + _origin[0].elapsed_time(s["start"]) * 1000.0
            dur = s["start"].elapsed_time(s["end"]) * 1000.0
            args["gpu_us"] = round(dur, 3)
        else:
            ts, dur = s["host_us"], 0.0
            args["captured_in_graph"] = True
        events.append({"name": s["op"], "cat": "mxfp6", "ph": "X", "ts": ts, "dur": dur, "pid": pid,
                       "tid": f"stream {s['stream']:#x}", "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write(directory=None):
    """Writes the trace; returns its path (None when nothing was recorded)."""
    if not _spans:
        return None
    directory = directory or DIR
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"mxfp6-{os.getpid()}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(trace(), f)
    return path


if enabled:
    atexit.register(write)

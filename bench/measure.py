"""Timing: device time of a callable, device copy bandwidth, host time per launch.

Device time comes from triton.testing.do_bench: CUDA events around each rep, the driver's
256 MB L2-clearing buffer zeroed before every rep (so no rep finds its inputs in L2), warmup and
rep given in milliseconds. We keep summary statistics of all samples, and report the median.
"""
import statistics
import time

import torch
import triton.testing


def _summary(samples_ms):
    s = sorted(samples_ms)
    pick = lambda f: s[min(len(s) - 1, int(round(f * (len(s) - 1))))]
    return {"median_ms": statistics.median(s), "p10_ms": pick(0.1), "p90_ms": pick(0.9), "min_ms": s[0],
            "max_ms": s[-1], "reps": len(s)}


def device_time(fn, warmup_ms, rep_ms):
    """Summary of fn's device time in ms over the reps do_bench made."""
    try:
        samples = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
    except (TypeError, ValueError, AssertionError):  # an older do_bench without "all"
        samples = None
    if isinstance(samples, (list, tuple)) and samples:
        return _summary(samples)
    q = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.1, 0.9, 0.0, 1.0])
    return {"median_ms": q[0], "p10_ms": q[1], "p90_ms": q[2], "min_ms": q[3], "max_ms": q[4], "reps": None}


def tbps(nbytes, ms):
    return nbytes / ms / 1e9 if ms else None


def copy_bandwidth(nbytes, warmup_ms, rep_ms, device="cuda"):
    """A device-to-device copy of nbytes random bytes; bandwidth counts bytes read + written."""
    nbytes = max(16, int(nbytes) // 16 * 16)
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    t = device_time(lambda: dst.copy_(src), warmup_ms, rep_ms)
    del src, dst
    return {"bytes_moved": 2 * nbytes, **t, "tbps": tbps(2 * nbytes, t["median_ms"])}


def host_us_per_call(launch, calls=200, repeats=50):
    """Host time per call in µs: the best of `repeats` loops of `calls` back-to-back calls, timed
    with perf_counter. Loops are short and the queue drains between them, so the launch queue
    never fills and blocks the host (each launch is of a one-program grid)."""
    launch()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            launch()
        best = min(best, (time.perf_counter() - t0) / calls)
    torch.cuda.synchronize()
    return best * 1e6

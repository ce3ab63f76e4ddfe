"""Timing: device time of a callable, device copy bandwidth, host time per launch.

Device time is measured the way triton.testing.do_bench measures it -- CUDA events around each
rep, a 256 MB buffer zeroed before every rep (so no rep finds its inputs in L2), warmup and reps
given in milliseconds -- with one difference: before each rep's start event the stream also
spins (torch.cuda._sleep) for longer than the host takes to issue the rep. do_bench leaves the
device idle whenever the host is slower than the device (a baseline launched through Python
layers, at the smaller shapes), so the host's launch time showed through some reps and moved a
baseline's figure between runs by up to a third; with the head start every rep times the
device's work alone, whatever launches it. We keep summary statistics of all samples, and
report the median.
"""
import statistics
import time

import torch

L2_CLEAR_BYTES = 256 * 2**20
HEAD_START_MIN_US = 20.0
SPIN_CYCLES_PER_US = 2000  # above the H200's top SM clock (1.98 GHz): the spin outlasts the host


def _quantile(sorted_ms, f):
    return sorted_ms[min(len(sorted_ms) - 1, int(round(f * (len(sorted_ms) - 1))))]


def _summary(samples_ms):
    s = sorted(samples_ms)
    return {"median_ms": statistics.median(s), "p10_ms": _quantile(s, 0.1), "p90_ms": _quantile(s, 0.9),
            "min_ms": s[0], "max_ms": s[-1], "reps": len(s)}


def host_us_per_rep(fn, calls=5):
    """The host time of one call of fn (its launches issued, not waited for): the median of a few."""
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def device_times(fn, warmup_ms, rep_ms, l2="dirty"):
    """fn's device time in ms, one sample per rep: L2 prepared, then a spin of twice the host's
    time per call (at least HEAD_START_MIN_US; the median of a few calls, so a first call that
    compiles does not count), then the events around fn. l2: "dirty" zeroes the 256 MB buffer
    (the benchmark's timing: no rep finds its inputs in L2, which is left full of lines to write
    back), "clean" reads it (full of clean lines), "none" leaves the L2 as the previous rep did."""
    cache = torch.empty(L2_CLEAR_BYTES, dtype=torch.int8, device="cuda")
    prepare = {"dirty": cache.zero_, "clean": cache.max, "none": lambda: None}[l2]
    spin = int(max(HEAD_START_MIN_US, 2 * host_us_per_rep(fn)) * SPIN_CYCLES_PER_US)

    def rep(start, end):
        prepare()
        torch.cuda._sleep(spin)
        start.record()
        fn()
        end.record()

    # The reps' count from the time of a few whole reps, as do_bench does.
    probe = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(5)]
    t0 = time.perf_counter()
    for start, end in probe:
        rep(start, end)
    torch.cuda.synchronize()
    per_rep_ms = max((time.perf_counter() - t0) * 1e3 / len(probe), 1e-3)
    for _ in range(max(1, int(warmup_ms / per_rep_ms))):
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(max(1, int(rep_ms / per_rep_ms)))]
    for start, end in events:
        rep(start, end)
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def device_time(fn, warmup_ms, rep_ms):
    """Summary of fn's device time in ms over the reps."""
    return _summary(device_times(fn, warmup_ms, rep_ms))


def quantiles_ms(fn, quantiles):
    """do_bench's (fn, quantiles) interface on device_times (25 ms warmup, 100 ms of reps), for
    triton.autotune(do_bench=...): the Triton baselines' tuners pick on the device time too."""
    s = sorted(device_times(fn, 25, 100))
    return [_quantile(s, q) for q in quantiles]


def tbps(nbytes, ms):
    return nbytes / ms / 1e9 if ms else None


def copy_bandwidth(nbytes, warmup_ms, rep_ms, device="cuda"):
    """A device-to-device copy of nbytes random bytes; bandwidth counts bytes read + written."""
    nbytes = max(16, int(nbytes) // 16 * 16)
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    t = device_time(lambda: dst.copy_(src), warmup_ms, rep_ms)
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

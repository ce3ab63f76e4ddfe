"""The baselines' compiles, done ahead of the measurements in worker processes.

torch.compile compiles every kernel/shape afresh (dynamic=False: one graph per shape), a few
seconds of host time each, and the Triton baselines compile their configs on their first call:
over a whole plan, more host time than all the timing. Workers on the GPU machine's other cores
make each problem's inputs and run its torch.compile and Triton baselines once, before anything
is timed, which fills the on-disk caches (Inductor's FX graph cache, Triton's kernel cache); the
measuring process then compiles the same graphs from those caches. Nothing is timed while the
workers run, and they have exited before the first measurement. Each worker's cold times are
kept, so the report still says what a first call costs without the caches.
"""
import concurrent.futures
import multiprocessing
import os
import time


def _worker_init():
    """Before the worker imports torch: one compile thread each (Inductor would otherwise start a
    pool of compile processes per worker, one per core)."""
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"


def _warm(p, seed, mode, compile_baseline, triton_baseline):
    """In a worker: p's inputs, then its torch.compile baseline (as run.py compiles it) and its
    Triton baseline, each called once. Returns their cold seconds, or the error."""
    import torch
    import triton_baselines
    res = {}
    try:
        p.make("cuda", seed)
        if compile_baseline:
            t = time.perf_counter()
            torch._dynamo.reset()
            fn = torch.compile(p.compile_fn or p.torch_fn, mode=mode, dynamic=False, fullgraph=True)
            fn(*p.args)
            torch.cuda.synchronize()
            res["torch_compile_s"] = time.perf_counter() - t
        if triton_baseline and p.kernel in triton_baselines.IMPLEMENTATIONS:
            t = time.perf_counter()
            triton_baselines.IMPLEMENTATIONS[p.kernel][0](*p.args)
            torch.cuda.synchronize()
            res["triton_s"] = time.perf_counter() - t
    except Exception as ex:  # the measuring process meets the same error and reports it
        res["error"] = f"{type(ex).__name__}: {ex}"[:500]
    finally:
        p.free()
        torch.cuda.empty_cache()
    return res


def precompile(tasks, workers, log):
    """tasks: (problem, seed, compile mode, compile_baseline, triton_baseline), problems not yet
    made. Runs them on `workers` processes; returns {problem name: _warm's result}."""
    if not tasks:
        return {}
    ctx = multiprocessing.get_context("spawn")  # a CUDA context cannot cross a fork
    done = {}
    t0 = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init) as pool:
        futures = {pool.submit(_warm, *task): task[0].name for task in tasks}
        for f in concurrent.futures.as_completed(futures):
            name = futures[f]
            try:
                done[name] = f.result()
            except Exception as ex:  # a worker that died (out of memory, a crash)
                done[name] = {"error": f"{type(ex).__name__}: {ex}"[:500]}
    errors = sum("error" in r for r in done.values())
    log(f"precompiled {len(done)} kernel/shapes' baselines on {workers} workers in "
        f"{time.perf_counter() - t0:.0f} s ({errors} with errors)")
    return done


def default_workers():
    """The GPU machine's cores but two (the measuring process, the system), at most 12: past that
    the workers' inputs and CUDA contexts cost more memory than the compiles gain."""
    return max(1, min(12, (os.cpu_count() or 4) - 2))

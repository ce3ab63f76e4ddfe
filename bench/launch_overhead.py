"""Launch overhead: host µs per call of one small op (LN-modulate forward of one token, a
one-program grid, so the host is what is timed) through each way a training process can launch it.

    PYTHONPATH=python python3 bench/launch_overhead.py --db DB --launch-bench build/bin/launch_bench \
        [--json OUT]

- the mxfp6 op from Python, eager, autograd on (x requires grad: the op records its backward) and
  forward-only (no_grad), outputs allocated by PyTorch each call;
- the same op from C++ through the client's C ABI, arguments prepared once (launch_bench):
  mxc_op_launch (a repeated signature's launches checked once), and composed and checked in full
  on every call (mxc_op_prepare + mxc_launches_enqueue);
- the same kernel's Triton version: a direct launch, and through torch.library.triton_op +
  wrap_triton (what torch.compile needs of a Triton kernel), allocating its outputs;
- PyTorch's built-in F.layer_norm of the same tensor.

Timing is measure.host_us_per_call: the best of 50 loops of 200 calls, the queue drained between
loops. Targets (docs/performance.md): <= 8 µs per eager op call, <= 4 µs per C++ launch.
"""

import argparse
import json
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import measure  # noqa: E402
import mxfp6  # noqa: E402
import triton_baselines  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--launch-bench", required=True)
    ap.add_argument("--json")
    args = ap.parse_args()
    mxfp6.connect(f"sqlite://{os.path.abspath(args.db)}")
    T, D = 1, 3072
    x = torch.randn(T, D, device="cuda").to(torch.bfloat16)
    scale = (torch.rand(T, D, device="cuda") - 0.5).to(torch.bfloat16)
    shift = torch.randn(T, D, device="cuda").to(torch.bfloat16)
    xg = x.clone().requires_grad_()
    res = {}
    res["mxfp6 op, eager, autograd on"] = measure.host_us_per_call(
        lambda: mxfp6.ln_modulate(xg, scale, shift, tokens_per_sample=1))
    with torch.no_grad():
        res["mxfp6 op, eager, forward only"] = measure.host_us_per_call(
            lambda: mxfp6.ln_modulate(x, scale, shift, tokens_per_sample=1))
    out = subprocess.run([args.launch_bench, "--db", args.db, "--tokens", str(T)], check=True, capture_output=True,
                         text=True).stdout
    cpp = json.loads(out)
    res["C++ launch, C ABI, arguments prepared once"] = cpp["host_us_per_launch"]
    res["C++ launch, C ABI, composed and checked in full"] = cpp["host_us_per_launch_checked_in_full"]

    y = torch.empty_like(x)
    mean, rstd = torch.empty(T, device="cuda"), torch.empty(T, device="cuda")
    res["Triton, direct launch"] = measure.host_us_per_call(
        triton_baselines.ln_modulate_fwd_launcher(x, scale, shift, y, mean, rstd, 1, 1e-6))
    wrapped = triton_op_version()
    if wrapped is not None:
        res["Triton, triton_op + wrap_triton"] = measure.host_us_per_call(lambda: wrapped(x, scale, shift))
    res["PyTorch F.layer_norm"] = measure.host_us_per_call(lambda: F.layer_norm(x, (D,), eps=1e-6))

    print(f"host µs per call ({torch.cuda.get_device_name()}, torch {torch.__version__}):")
    for k, v in res.items():
        print(f"  {k:48s} {v:7.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "host_us_per_call": res, "cpp": cpp, "stats": {k: v for k, v in mxfp6.stats().items()
                                                                      if k != "warned"}}, f, indent=1)


def triton_op_version():
    """The Triton kernel as a torch.library.triton_op (torch >= 2.6), outputs allocated per call."""
    lib = getattr(torch, "library", None)
    if not hasattr(lib, "triton_op"):
        return None
    import triton

    @lib.triton_op("mxfp6_bench::ln_modulate_fwd", mutates_args={})
    def ln_modulate_fwd(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        T, D = x.shape
        y = torch.empty_like(x)
        mean = torch.empty(T, device=x.device, dtype=torch.float32)
        rstd = torch.empty(T, device=x.device, dtype=torch.float32)
        lib.wrap_triton(triton_baselines._ln_modulate_fwd_kernel)[(T,)](
            x, scale, shift, y, mean, rstd, T, scale.shape[0], 1, 1e-6, D=D, BLOCK_D=triton.next_power_of_2(D),
            ROWS=1, num_warps=4)
        return y

    return ln_modulate_fwd


if __name__ == "__main__":
    main()

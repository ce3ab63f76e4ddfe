"""`mxfp6c run` on real .npy files, written and read here with the standard library (npy_files.py).

Numerics: tests/fixtures/rmsnorm_softcap.mxk through the fp64 interpreter against the formula
computed here in fp64,
    y = cap * tanh(x * w / sqrt(mean(x^2) + eps)),  cap = 2 (passed as --in cap=2), eps = 1e-6,
on 16 rows of 3072 bf16 values whose scales span 2^-8 .. 2^7. Metric: per element, |y - ref| in
ulps of bf16 at ref. Bound: 0.5 ulp + 2^-20 -- the interpreter computes in fp64 and rounds once to
bf16 (half an ulp); the rest is fp64 round-off of a different summation order. The outputs of
gelu_mul_pack.mxk (u8 packed data and scales) are checked for dtype and shape.

Errors: a missing input, an unknown input name, a wrong shape or rank, a wrong dtype, a file that
is not .npy, a truncated one, a missing one and a scalar that is not a number each exit 1 with a
message naming the problem, and write nothing; so does --device with no GPU driver (a missing
driver library) and with a driver that sees no device (the fake CUDA driver with 0 devices).

usage: run_test.py MXFP6C FAKE_CUDA_DRIVER"""
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npy_files as npy  # noqa: E402
from checks import check, finish, fixture, run  # noqa: E402

MXFP6C, FAKE_DRIVER = sys.argv[1:3]
RMSNORM, GELU = fixture("rmsnorm_softcap.mxk"), fixture("gelu_mul_pack.mxk")
T, D = 16, 3072

with tempfile.TemporaryDirectory() as tmp:
    def path(name):
        return os.path.join(tmp, name)

    x = []
    for t in range(T):  # row t at scale 2^(t - 8): tiny to large rows, the same normalized output
        x += npy.random_bf16(D, seed=t, scale=2.0 ** (t - 8))
    npy.save(path("x.npy"), "<u2", (T, D), x)
    w = [npy.bf16_bits(0.5 + (i % 97) / 97) for i in range(D)]
    npy.save(path("w.npy"), "<u2", (D,), w)

    # The interpreter against the formula in fp64.
    r = run(MXFP6C, "run", RMSNORM, "--kernel", "rmsnorm_softcap", "--in",
            f"x={path('x.npy')},w={path('w.npy')},cap=2", "--out", path("out"))
    check(r.returncode == 0 and r.stderr == "", f"run rmsnorm_softcap: {r.returncode} {r.stderr}")
    if r.returncode == 0:
        descr, shape, y = npy.load(path("out/y.npy"))
        check(descr == "<u2" and shape == (T, D), f"y is {descr} {shape}, expected <u2 {(T, D)}")
        cap, eps, worst = 2.0, 1e-6, 0.0
        for t in range(T):
            v = [npy.bf16_value(b) for b in x[t * D:(t + 1) * D]]
            rstd = 1.0 / math.sqrt(math.fsum(a * a for a in v) / D + eps)
            for i in range(D):
                ref = cap * math.tanh(v[i] * rstd * npy.bf16_value(w[i]) / cap)
                got = npy.bf16_value(y[t * D + i])
                worst = max(worst, abs(got - ref) / npy.bf16_ulp(ref))
        print(f"rmsnorm_softcap: max error {worst:.6f} ulp of bf16 against fp64 (bound 0.5 + 2^-20)")
        check(worst <= 0.5 + 2.0 ** -20, f"rmsnorm_softcap max error {worst} ulp exceeds 0.5 + 2^-20")

    # Outputs of other dtypes and shapes: the packed bytes and scales of gelu_mul_pack.
    r = run(MXFP6C, "run", GELU, "--kernel", "gelu_mul_pack", "--in", f"gate={path('x.npy')},up={path('x.npy')}",
            "--out", path("gelu"))
    check(r.returncode == 0, f"run gelu_mul_pack: {r.stderr}")
    if r.returncode == 0:
        for name, cols in (("data", D * 3 // 4), ("scales", D // 32)):
            descr, shape, values = npy.load(path(f"gelu/{name}.npy"))
            check(descr == "|u1" and shape == (T, cols), f"{name} is {descr} {shape}, expected |u1 {(T, cols)}")
            check(any(values), f"{name} is all zeros")

    # Errors: exit status 1, the message, and no output written.
    npy.save(path("narrow.npy"), "<u2", (T, 1024), x[:T * 1024])
    npy.save(path("f32.npy"), "<f4", (T, D), [0.0] * (T * D))
    with open(path("text.npy"), "w") as f:
        f.write("x = [1, 2, 3]\n")
    with open(path("x.npy"), "rb") as f:
        with open(path("short.npy"), "wb") as g:
            g.write(f.read()[:64 + 100])
    for inputs, expect in [
            (f"x={path('x.npy')}", "input tensor 'w' has no --in w=FILE.npy"),
            (f"x={path('x.npy')},w={path('w.npy')},z={path('w.npy')}", "--in names 'z', which is no input"),
            (f"x={path('narrow.npy')},w={path('w.npy')}", "argument 'x' dim 1 (D) is 1024, expected 3072"),
            (f"x={path('x.npy')},w={path('x.npy')}", "argument 'w' has rank 2"),
            (f"x={path('f32.npy')},w={path('w.npy')}", "holds '<f4' elements; a bf16 tensor takes '<u2'"),
            (f"x={path('text.npy')},w={path('w.npy')}", "text.npy is not a .npy file"),
            (f"x={path('short.npy')},w={path('w.npy')}", "short.npy: truncated data"),
            (f"x={path('none.npy')},w={path('w.npy')}", "cannot read " + path("none.npy")),
            (f"x={path('x.npy')},w={path('w.npy')},cap=big", "scalar 'cap' is f32, 'big' is not a number"),
            (f"x={path('x.npy')},{path('w.npy')}", "is not NAME=FILE.npy or NAME=VALUE")]:
        out = path("never")
        r = run(MXFP6C, "run", RMSNORM, "--kernel", "rmsnorm_softcap", "--in", inputs, "--out", out)
        check(r.returncode == 1 and r.stderr.startswith("mxfp6c: error: ") and expect in r.stderr,
              f"--in {inputs}: expected exit 1 and '{expect}', got {r.returncode}: {r.stderr}")
        check(not os.path.exists(out), f"--in {inputs} wrote {out}")

    # --device where there is no GPU: no driver library, and a driver without devices.
    good = f"x={path('x.npy')},w={path('w.npy')}"
    for env, expect in [({"MXFP6_GPU_DRIVER": path("no-such-driver.so")}, "no GPU driver found"),
                        ({"MXFP6_GPU_DRIVER": FAKE_DRIVER, "FAKE_CUDA_DEVICES": "0"}, "no GPU device")]:
        for mode in (["--device", "0"], ["--compare"]):
            r = run(MXFP6C, "run", RMSNORM, "--kernel", "rmsnorm_softcap", "--in", good, "--out", path("never"),
                    "--target", "sm_90", *mode, env=env)
            check(r.returncode == 1 and f"mxfp6c: error: --device 0: {expect}" in r.stderr,
                  f"{mode} with {env}: expected exit 1 and '{expect}', got {r.returncode}: {r.stderr}")
            check(not os.path.exists(path("never")), f"{mode} with {env} wrote outputs")
    r = run(MXFP6C, "run", RMSNORM, "--kernel", "rmsnorm_softcap", "--in", good, "--out", path("never"), "--device", "0")
    check(r.returncode == 1 and "--device and --compare need --target" in r.stderr, f"--device without --target: {r.stderr}")

finish()

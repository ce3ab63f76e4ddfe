"""mxfp6-run where it can run without a GPU.

- Usage errors exit 2 (missing --object or --in, unknown option, neither --out nor --compare, a
  --device that is not a number).
- A missing code object or metadata file exits 1 naming it, before any device or interpreter time.
- No GPU: no driver library is "no GPU driver found", a driver without devices (the fake CUDA
  driver with FAKE_CUDA_DEVICES=0) "no GPU device", both exit 1 and write nothing; a bad input
  is still reported as such first (it is checked before the device is opened).
- On the fake CUDA driver (which loads PTX and launches, but runs no kernel of ours), the whole
  --compare path: the interpreter runs, the object is loaded and launched, and one report line
  per output says "not bit-exact" with its ulp error and element count; --out writes the device's
  outputs.
- A code object that is not of this kernel and configuration is refused: another kernel's, one
  compiled with other tunables, and metadata that is not kernel metadata.

The objects are PTX from `mxfp6c compile --emit ptx` (no ptxas needed), cut to start at its
.version line, where the fake driver expects it.

usage: mxfp6_run_test.py MXFP6C MXFP6_RUN FAKE_CUDA_DRIVER"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npy_files as npy  # noqa: E402
from checks import check, finish, fixture, run  # noqa: E402

MXFP6C, MXFP6_RUN, FAKE_DRIVER = sys.argv[1:4]
RMSNORM, GELU = fixture("rmsnorm_softcap.mxk"), fixture("gelu_mul_pack.mxk")
T, D = 8, 3072

with tempfile.TemporaryDirectory() as tmp:
    def path(name):
        return os.path.join(tmp, name)

    def compile_ptx(source, kernel, out, *extra):
        r = run(MXFP6C, "compile", source, "--kernel", kernel, "--target", "sm_90", "--emit", "ptx", "-o", out,
                "--quiet", *extra)
        check(r.returncode == 0 and os.path.exists(out + ".json"), f"compile {kernel}: {r.stderr}")
        with open(out) as f:
            text = f.read()
        with open(out, "w") as f:
            f.write(text[text.find(".version"):])

    compile_ptx(RMSNORM, "rmsnorm_softcap", path("rms.ptx"))
    compile_ptx(GELU, "gelu_mul_pack", path("gelu.ptx"))
    compile_ptx(RMSNORM, "rmsnorm_softcap", path("rms128.ptx"), "--config", "THREADS=128")
    npy.save(path("x.npy"), "<u2", (T, D), npy.random_bf16(T * D, seed=1))
    npy.save(path("w.npy"), "<u2", (D,), [npy.bf16_bits(1.0)] * D)
    npy.save(path("f32.npy"), "<f4", (D,), [1.0] * D)
    good = f"x={path('x.npy')},w={path('w.npy')}"

    def rms(*args, env=None):
        return run(MXFP6_RUN, RMSNORM, "--kernel", "rmsnorm_softcap", *args, env=env)

    no_driver = {"MXFP6_GPU_DRIVER": path("no-such-driver.so")}
    no_device = {"MXFP6_GPU_DRIVER": FAKE_DRIVER, "FAKE_CUDA_DEVICES": "0"}
    fake = {"MXFP6_GPU_DRIVER": FAKE_DRIVER}

    for args, expect in [(["--in", good, "--compare"], "--object is required"),
                         (["--object", path("rms.ptx"), "--compare"], "--in is required"),
                         (["--object", path("rms.ptx"), "--in", good], "--out DIR or --compare is required"),
                         (["--object", path("rms.ptx"), "--in", good, "--compare", "--target", "sm_90"],
                          "unknown option --target"),
                         (["--object", path("rms.ptx"), "--in", good, "--compare", "--device", "gpu0"],
                          "--device takes a GPU number, got 'gpu0'")]:
        r = rms(*args)
        check(r.returncode == 2 and f"mxfp6-run: error: {expect}" in r.stderr and "usage:" in r.stderr,
              f"{args}: expected exit 2 and '{expect}', got {r.returncode}: {r.stderr}")

    for args, expect in [(["--object", path("none.cubin")], "cannot read code object " + path("none.cubin")),
                         (["--object", path("rms.ptx"), "--metadata", path("none.json")],
                          "cannot read kernel metadata " + path("none.json"))]:
        r = rms(*args, "--in", good, "--compare", env=fake)
        check(r.returncode == 1 and expect in r.stderr, f"{args}: expected exit 1 and '{expect}', got {r.stderr}")

    for env, expect in [(no_driver, "no GPU driver found"), (no_device, "no GPU device")]:
        r = rms("--object", path("rms.ptx"), "--in", good, "--compare", "--out", path("never"), env=env)
        check(r.returncode == 1 and f"mxfp6-run: error: --device 0: {expect}" in r.stderr,
              f"{env}: expected exit 1 and '{expect}', got {r.returncode}: {r.stderr}")
        check(not os.path.exists(path("never")), f"{env}: outputs written without a GPU")
    r = rms("--object", path("rms.ptx"), "--in", f"x={path('x.npy')},w={path('f32.npy')}", "--compare", env=no_driver)
    check(r.returncode == 1 and "holds '<f4' elements" in r.stderr, f"bad input without a GPU: {r.stderr}")

    # The fake driver: everything but the kernel's arithmetic.
    report = r"^{}: not bit-exact, max error \S+ ulp of {}, \d+ of {} elements differ$"
    packed = r"^{}: not bit-exact, \d+ of {} bytes differ \(packed: compared bit for bit only\)$"
    r = rms("--object", path("rms.ptx"), "--in", good, "--compare", "--out", path("out"), env=fake)
    check(r.returncode == 0 and re.match(report.format("y", "bf16", T * D), r.stdout.strip()),
          f"--compare on the fake driver: {r.returncode} {r.stdout} {r.stderr}")
    check(os.path.exists(path("out/y.npy")) and npy.load(path("out/y.npy"))[:2] == ("<u2", (T, D)),
          "--out on the fake driver wrote no y.npy of bf16[T, D]")
    r = run(MXFP6_RUN, GELU, "--kernel", "gelu_mul_pack", "--object", path("gelu.ptx"),
            "--in", f"gate={path('x.npy')},up={path('x.npy')}", "--compare", env=fake)
    lines = r.stdout.strip().split("\n")
    check(r.returncode == 0 and len(lines) == 2 and re.match(packed.format("data", T * D * 3 // 4), lines[0])
          and re.match(packed.format("scales", T * D // 32), lines[1]),
          f"gelu_mul_pack --compare on the fake driver: {r.stdout} {r.stderr}")

    for args, expect in [(["--object", path("gelu.ptx")], "the code object is of kernel 'gelu_mul_pack', not 'rmsnorm_softcap'"),
                         (["--object", path("rms128.ptx")], "compiled with THREADS=128, this run has THREADS=384"),
                         (["--object", path("rms.ptx"), "--metadata", RMSNORM], "kernel metadata: invalid JSON")]:
        r = rms(*args, "--in", good, "--compare", env=fake)
        check(r.returncode == 1 and expect in r.stderr, f"{args}: expected exit 1 and '{expect}', got {r.stderr}")
    r = rms("--object", path("rms128.ptx"), "--config", "THREADS=128", "--in", good, "--compare", env=fake)
    check(r.returncode == 0, f"the object's own --config: {r.stderr}")

finish()

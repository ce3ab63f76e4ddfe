#!/usr/bin/env python3
"""The benchmark's plans of ours, through the ops layer, on the CPU (no GPU): for a small shape of
every problem class and variant, the problem's call spells the key it should (written out here from
the op table's key form, not read from the code under test), the code objects at hand make plans
for it, the ops layer accepts every plan with the problem's call (mxc_op_check: names, shapes,
dtypes, strides, alignment, overlap of every launch), and composes each into the launches the
plan's family implies (a tree-reduced family: the pass, any transpose, then one reduce launch per
level of partials.tree_chunks). The prologue without bf16 output finds its _bf16 twin at the same
plan; an LN-modulate backward's plans cross the op's P choices, those above S left out.

    python3 bench/plans_test.py [--lib build/lib/libmxfp6rt.so] [--kernels build/gpu_kernels]

Needs torch (CPU tensors stand in for the GPU's: nothing is launched) and the client library.
"""
import argparse
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mxfp6rt  # noqa: E402
import ours  # noqa: E402
import partials  # noqa: E402

RESULTS = {"passed": 0, "failed": 0}


def case(name, fn, *args):
    try:
        fn(*args)
        RESULTS["passed"] += 1
        print(f"ok    {name}")
    except Exception as e:  # report every failure, not just the first
        RESULTS["failed"] += 1
        print(f"FAIL  {name}: {type(e).__name__}: {e}")


def problems_and_keys(problems):
    """(problem, its key as the op table spells keys: op/variant/target/sizes/M)."""
    P = problems
    rows, T = 24 * 1024, 1024  # 24 heads of 128; two samples of 512 positions
    k = lambda op, variant, sizes, m: f"{op}/{variant}/sm_90/{sizes}/{m}"  # noqa: E731
    out = []
    for layout in ("bsd", "sbd"):
        out += [(P.LnModulate(T, layout=layout), k("ln_modulate_fwd", f"S=512,layout={layout}", "D=3072", T)),
                (P.LnModulateBwd(T, layout=layout), k("ln_modulate_bwd", f"S=512,layout={layout}", "D=3072", T))]
    out += [(P.LnModulatePerToken(T), k("ln_modulate_fwd_per_token", "", "D=3072", T)),
            (P.LnModulateBwdPerToken(T), k("ln_modulate_bwd_per_token", "", "D=3072", T)),
            (P.NormRopeSlice(rows), k("norm_rope_fwd", "H=24", "", rows)),
            (P.NormRopeSliceBwd(rows, sequence_major=True), k("norm_rope_bwd", "H=24", "", rows))]
    for layout in ("megatron", "blocked"):
        out += [(P.NormRopeQkv(rows, layout), k("norm_rope_qkv_fwd", f"H=24,layout={layout}", "", rows)),
                (P.NormRopeQkvBwd(rows, layout), k("norm_rope_qkv_bwd", f"H=24,layout={layout}", "", rows))]
    out += [(P.NormRopeQkv(rows, "megatron", sequence_major=True), k("norm_rope_qkv_fwd", "H=24,layout=megatron", "", rows)),
            (P.NormRopeQkvBwd(rows, shared_table=True), k("norm_rope_qkv_bwd", "H=24,layout=megatron", "", rows))]
    for fmt in ("E3M2", "E2M3"):
        for cls in (P.NormRopeQkvBwdPack, P.NormRopeQkvBwdPackBf16):
            out.append((cls(rows, fmt), k(cls.kernel, f"FMT={fmt},H=24,MODE=RCEIL", "", rows)))
        for cls in (P.MxPackRows, P.MxPackCols, P.MxPackDual):
            out.append((cls(256, 3072, fmt), k(cls.kernel, f"FMT={fmt},MODE=RCEIL", "C=3072", 256)))
    out.append((P.NormRopeQkvBwdPack(rows, "E3M2", layout="blocked"),
                k("norm_rope_qkv_bwd_pack", "FMT=E3M2,H=24,MODE=RCEIL", "", rows)))
    return out


def expected_launches(problem, plan):
    """How many launches a plan's family implies for the problem: one per launch role, a tree's
    reduce role once per level of its chunks."""
    roles = [launch["role"] for launch in plan["launches"]]
    if "reduce" not in roles or problem.kernel.startswith("ln_modulate"):
        return len(roles)
    tiled = plan["family"] == "tiles"
    P = problem.T // 32 * problem.heads if tiled else min(8192, problem.rows)
    return len(roles) - 1 + len(partials.tree_chunks(P))


def check_problem(torch, catalog, problem, key):
    problem.make("cpu", 1)
    outs = problem.alloc_outputs()
    got = ours.call_of(problem, outs, problem.kernel).key("sm_90")
    assert got == key, f"the call's key is {got}, expected {key}"
    found, _ = ours.plans(problem, catalog, "sm_90")
    assert found, f"no plan of {key} among the code objects"
    ids = [plan.config for plan in found]
    assert len(set(ids)) == len(ids), f"a plan listed twice: {ids}"
    for plan in found:
        why = ours.check_call(plan, problem, outs)
        assert why is None, f"{plan.config}: {why}"
        call = ours.call_of(problem, outs, plan.plan["op"])
        prepared = ours.Prepared(plan, call, torch, "cpu", None)
        n = expected_launches(problem, plan.plan)
        assert len(prepared.infos) == n, f"{plan.config}: {len(prepared.infos)} launches, the family implies {n}"
        indices = [i for i, _ in prepared.infos]
        assert indices == sorted(indices) and set(indices) == set(range(len(plan.plan["launches"]))), indices
        assert all(g[0] >= 1 for _, g in prepared.infos), prepared.infos
    if problem.kernel == "ln_modulate_bwd":
        ps = sorted({plan.plan["partials"] for plan in found})
        assert ps == [P for P in (4, 8, 16) if P <= problem.S], ps
    if problem.twin_op:
        twinned = [plan for plan in found if plan.twin is not None]
        assert twinned, f"no plan of {key} has its {problem.twin_op} twin"
        for plan in twinned:
            mine, theirs = plan.plan["launches"], plan.twin.plan["launches"]
            assert [(l["role"], l["config"]) for l in mine] == [(l["role"], l["config"]) for l in theirs]
            assert theirs[0]["kernel"] == problem.twin_op, theirs[0]
            twin_outs = problem.alloc_outputs(twin=True)
            why = ours.check_call(plan.twin, problem, twin_outs)
            assert why is None, f"twin of {plan.config}: {why}"
    problem.free()


def refusals(torch, catalog, problems):
    """A plan of another key, and an object of another config, are refused by the ops layer."""
    lib, _ = ours.client()
    fwd = problems.LnModulate(1024)
    fwd.make("cpu", 1)
    found, key = ours.plans(fwd, catalog, "sm_90")
    plan = found[0]
    handle, why = ours._op(lib, key.replace("ln_modulate_fwd", "ln_modulate_bwd"), plan.plan, plan.objects)
    assert handle is None and "ln_modulate" in why, why
    other = [o for (k, _), o in catalog.objects.items() if k == plan.plan["launches"][0]["kernel"] and o != plan.objects[0]]
    assert other, "one object of the kernel only"
    handle, why = ours._op(lib, key, plan.plan, [other[0]])
    assert handle is None and why, "an object of another config must be refused"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=mxfp6rt.default_library_path())
    ap.add_argument("--kernels", default=str(HERE.parent / "build" / "gpu_kernels"))
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: no torch (python3-torch)")
        return 77
    ours.client(pathlib.Path(args.lib).resolve().parent)
    import problems
    catalog = ours.Catalog(mxfp6rt.find_code_objects(args.kernels, target="sm_90", recursive=True))
    for problem, key in problems_and_keys(problems):
        case(f"{problem.name}: {key}", check_problem, torch, catalog, problem, key)
    case("refusals: another key's plan, another config's object", refusals, torch, catalog, problems)
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""Derived figures, targets, and the written results (JSON, Markdown, PNG) of a benchmark run.

Needs no torch (the CPU smoke test runs it on synthetic data); matplotlib only for the chart.
A run's document holds raw measurements (median ms per implementation); finalize() adds the
bandwidths, ratios to copy, speedups and the pass/miss of every target of docs/architecture.md section 8.
"""
import gzip
import itertools
import json
import textwrap
import pathlib


def wrap_markdown(md, width=100, longest=400):
    """Lines longer than `longest` (header fields, check summaries) wrapped at `width` columns, a
    list item's continuation indented under its text; tables and code blocks stay as they are, so
    the repository's line limit (tests/repo/check_record.py) holds for every report."""
    out, in_code = [], False
    for line in md.split("\n"):
        if line.startswith("```"):
            in_code = not in_code
        if in_code or line.startswith("|") or len(line) <= longest:
            out.append(line)
            continue
        hard_break = line.endswith("  ")
        indent = "  " if line.startswith("- ") else ""
        pieces = textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False,
                               break_on_hyphens=False)
        if hard_break:
            pieces[-1] += "  "
        out.extend(pieces)
    return "\n".join(out)


IMPLS = ("mxfp6c", "eager", "torch_compile", "triton")
LABELS = {"mxfp6c": "mxfp6c (ours)", "eager": "PyTorch eager", "torch_compile": "torch.compile",
          "triton": "Triton (baseline)"}
BASELINES = IMPLS[1:]
# docs/architecture.md section 8. Each result carries its kernel's copy target ("copy_target": forward 0.90,
# backward and row-only packing 0.85, column-only and dual packing 0.80, the packer prologue 0.75).
TARGETS = {
    "forward_copy_ratio": 0.90,          # effective bandwidth / device copy bandwidth ...
    "backward_copy_ratio": 0.85,
    "row_pack_copy_ratio": 0.85,
    "column_dual_pack_copy_ratio": 0.80,
    "prologue_pack_copy_ratio": 0.75,
    "copy_ratio_min_tokens": 16384,      # ... at T >= 16384 tokens
    "faster_than": ["torch_compile", "triton"],  # on every shape
    "host_launch_python_us": 8.0,        # through the Python op (here: ctypes, the closest we have)
    "host_launch_cpp_us": 4.0,           # from C++: not measured by this harness
}


def read_doc(path):
    """A run's document from its JSON: as a run writes it (<stem>.json) or as bench/results keeps
    the older ones (<stem>.json.gz: the device copies the working tree under a size limit)."""
    data = pathlib.Path(path).read_bytes()
    return json.loads(gzip.decompress(data) if str(path).endswith(".gz") else data)


def doc_stem(path):
    """The file name stem shared by a run's .json (or .json.gz), .md and .png."""
    return pathlib.Path(path).name.removesuffix(".gz").removesuffix(".json")


def copy_ceiling(doc):
    """The higher of the copy bandwidths measured at the start and end of the run: ratios are
    then never flattered by a slow copy measurement."""
    runs = [doc.get("copy", {}).get(k) for k in ("start", "end")]
    values = [r["tbps"] for r in runs if r and r.get("tbps")]
    return max(values) if values else None


def copy_ceiling_of(doc, rec):
    """The copy ceiling of the call that measured rec: the run's own, or that of the --resume call
    whose index rec["call"] holds (each call measures the copy at its start and end)."""
    call = rec.get("call") or 0
    return copy_ceiling(doc) if call == 0 else copy_ceiling(doc["resumed"][call - 1])


def _timed(impl):
    return impl is not None and impl.get("median_ms") is not None


def _derive(impl, nbytes, ceiling, baseline=False):
    """TB/s and the ratio to copy: of ours' median time, or of a baseline's baseline_ms."""
    if _timed(impl):
        impl["tbps"] = nbytes / (baseline_ms(impl) if baseline else impl["median_ms"]) / 1e9
        impl["copy_ratio"] = impl["tbps"] / ceiling if ceiling else None


def finalize(doc):
    ceiling = copy_ceiling(doc)
    doc.setdefault("copy", {})["ceiling_tbps"] = ceiling
    start, end = doc["copy"].get("start"), doc["copy"].get("end")
    if start and end and start.get("tbps") and end.get("tbps"):
        doc["copy"]["drift"] = abs(start["tbps"] - end["tbps"]) / max(start["tbps"], end["tbps"])
    for rec in doc.get("results", []):
        impls = rec.get("impls", {})
        rec_ceiling = copy_ceiling_of(doc, rec)
        for name, impl in impls.items():
            _derive(impl, rec["min_bytes"], rec_ceiling, baseline=name != "mxfp6c")
            for entry in impl.get("all", []):
                _derive(entry, rec["min_bytes"], rec_ceiling)
        ours = impls.get("mxfp6c")
        rec["speedup"] = {b: baseline_ms(impls[b]) / ours["median_ms"]
                          for b in BASELINES if _timed(ours) and _timed(impls.get(b))}
        rec["verdict"] = _verdicts(rec, ours, impls)
    host = doc.get("host_launch") or {}
    if host.get("mxfp6c_prepared_us") is not None:
        host["verdict_python_op"] = "pass" if host["mxfp6c_prepared_us"] <= TARGETS["host_launch_python_us"] else "miss"
    doc["targets"] = TARGETS
    return doc


def copy_target(rec):
    """The result's bandwidth target as a fraction of copy (forward, if the record predates targets)."""
    return rec.get("copy_target") or TARGETS["forward_copy_ratio"]


def baseline_ms(impl):
    """A baseline's time for the comparisons: the p10 of its reps where recorded (its fastest
    tenth), else its median. A baseline whose Python launch path shows through the timing events
    on some reps is judged by its kernel; ours is judged by its median, so the comparison leans
    against us."""
    p10 = impl.get("p10_ms")
    return min(impl["median_ms"], p10) if p10 is not None else impl["median_ms"]


def _verdicts(rec, ours, impls):
    v = {}
    valid = _timed(ours) and ours.get("ok")
    if not valid:
        v["copy"] = "invalid" if _timed(ours) else "no result"
    elif rec["tokens"] < TARGETS["copy_ratio_min_tokens"]:
        v["copy"] = "n/a"
    elif ours.get("copy_ratio") is None:
        v["copy"] = "no copy figure"
    else:
        v["copy"] = "pass" if ours["copy_ratio"] >= copy_target(rec) else "miss"
    for b in TARGETS["faster_than"]:
        base = impls.get(b)
        if not valid:
            v[b] = v["copy"] if v["copy"] in ("invalid", "no result") else "invalid"
        elif not _timed(base):
            v[b] = "no baseline"
        else:
            v[b] = "pass" if ours["median_ms"] < baseline_ms(base) else "miss"
            if not base.get("ok"):
                v[b] += " (baseline failed its check)"
    return v


# ---------------------------------------------------------------------------------------------
# Markdown

def _num(x, fmt):
    return "—" if x is None else format(x, fmt)


def _cell_tbps(impl):
    if impl is None:
        return "—"
    if impl.get("error") and not _timed(impl):
        return "error"
    s = _num(impl.get("tbps"), ".2f")
    return s + (" ✗" if _timed(impl) and not impl.get("ok") else "")


def _us(impl):
    return _num(impl["median_ms"] * 1e3 if _timed(impl) else None, ".1f")


def _us_spread(impl):
    """Median µs with the p10–p90 of its reps, where recorded."""
    if impl is None:
        return "—"
    if _timed(impl) and impl.get("p10_ms") is not None:
        return f"{impl['median_ms'] * 1e3:.1f} ({impl['p10_ms'] * 1e3:.1f}–{impl['p90_ms'] * 1e3:.1f})"
    return _us(impl)


def _sorted(results):
    order = {k: i for i, k in enumerate((
        "ln_modulate_fwd", "ln_modulate_fwd_per_token", "norm_rope_qkv_fwd", "norm_rope_fwd", "ln_modulate_bwd",
        "ln_modulate_bwd_per_token", "norm_rope_qkv_bwd", "norm_rope_bwd", "mxfp6_pack_rows", "mxfp6_pack_cols",
        "mxfp6_pack_dual", "norm_rope_qkv_bwd_pack", "norm_rope_qkv_bwd_pack_bf16"))}
    layouts = {"megatron": 0, "blocked": 1, "[B, S, D]": 0, "[S, B, D]": 1}
    orders = {"[B, S]": 0, "[S, B]": 1}  # norm+RoPE tokens
    formats = {"E3M2": 0, "E2M3": 1}
    return sorted(results, key=lambda r: (order.get(r["kernel"], 99), layouts.get(r.get("shape", {}).get("layout"), 2),
                                          orders.get(r.get("shape", {}).get("tokens"), 0),
                                          formats.get(r.get("shape", {}).get("format"), 2),
                                          r.get("shape", {}).get("C", 0), r["tokens"]))


def _shape(rec):
    """The shape column: the problem's label, and the MXFP6 format where it has one (E3M2 and E2M3
    of a packer share a label)."""
    fmt = (rec.get("shape") or {}).get("format")
    return f"{rec['label']} {fmt}" if fmt else rec["label"]


def _target_cell(rec, verdict):
    return f"{verdict} (≥{copy_target(rec) * 100:.0f}%)" if verdict in ("pass", "miss") else verdict


def markdown(doc):
    env, copy, method = doc.get("environment", {}), doc.get("copy", {}), doc.get("method", {})
    out = [f"# mxfp6c benchmark: {env.get('gpu', '?')}, {doc.get('date', '?')}", ""]
    out.append(f"Command (repository root): `{doc.get('command', '?')}`  ")
    out.append("Software: " + ", ".join(f"{k} {env[k]}" for k in ("torch", "triton", "cuda") if k in env) + "  ")
    if env.get("sms"):
        out.append(f"GPU: {env.get('gpu')}, {env['sms']} SMs, L2 {env.get('l2_mb', '?')} MB, {env.get('target', '')}  ")
    start, end = (copy.get(k) or {} for k in ("start", "end"))
    out.append(f"Device copy ({_num((start.get('bytes_moved') or 0) / 1e9, '.1f')} GB moved): start "
               f"{_num(start.get('tbps'), '.3f')} TB/s, end {_num(end.get('tbps'), '.3f')} TB/s; "
               f"ratios use {_num(copy.get('ceiling_tbps'), '.3f')} TB/s (the higher)  ")
    for n, call in enumerate(doc.get("resumed", []), 1):
        cs, ce = (call.get("copy", {}).get(k) or {} for k in ("start", "end"))
        rerun, kept = call.get("rerun") or [], call.get("rerun_skipped") or []
        out.append(f"Resumed (call {n}, {call.get('date', '?')}): `{call.get('command', '?')}`: the kernel/shapes "
                   f"the calls before skipped" + (f", and measured again (earlier records under \"replaced\" in "
                   f"the JSON): {', '.join(rerun)}" if rerun else "") +
                   (f"; not measured again within its time budget, their records those of earlier calls: "
                    f"{', '.join(kept)}" if kept else "") + f"; its device copy "
                   f"{_num(cs.get('tbps'), '.3f')} / {_num(ce.get('tbps'), '.3f')} TB/s (start / end), the ceiling "
                   "of its rows' ratios  ")
    if "overlapping_launches" in env:
        out.append("Launches of ours: " + ("a code object that waits for the previous grid (metadata "
                   "`waits_for_previous_grid`) starts overlapping its tail (programmatic dependent launch)"
                   if env["overlapping_launches"] else "in stream order (this device or driver has no "
                   "programmatic dependent launch)") + "  ")
    for key in ("timing", "torch_compile", "precompile", "inputs", "checks", "bytes"):
        if method.get(key):
            out.append(f"{key.replace('_', '.') if key == 'torch_compile' else key.capitalize()}: {method[key]}  ")
    out += ["", "TB/s = minimal bytes / time: ours' median, a baseline's p10 (see ×). ✗ = failed its check (number kept, flagged). "
            f"Targets: ours ≥ {TARGETS['forward_copy_ratio']:.0%} of copy (forward kernels), "
            f"≥ {TARGETS['backward_copy_ratio']:.0%} (backward kernels), ≥ {TARGETS['row_pack_copy_ratio']:.0%} "
            f"(row-only MXFP6 packing), ≥ {TARGETS['column_dual_pack_copy_ratio']:.0%} (column-only and dual), "
            f"≥ {TARGETS['prologue_pack_copy_ratio']:.0%} (the packer prologue), at T ≥ "
            f"{TARGETS['copy_ratio_min_tokens']} tokens; faster than torch.compile "
            "and Triton on every shape. × and 'faster than' compare ours' median with a baseline's p10 (its fastest "
            "tenth of reps: a baseline whose launch path shows through the timing on some reps is judged by its "
            "kernel). Backward kernels and the packer prologue are two launches of ours (the pass "
            "and the fixed-order reduction of its partials) timed together; the partials are not in the minimal "
            "bytes. The prologue's baselines run the unfused backward, then the dual packer.", ""]
    head = ["kernel", "shape", "min MB", "copy@size TB/s", "ours µs", "ours TB/s", "% copy", "eager TB/s",
            "compile TB/s", "Triton TB/s", "× eager", "× compile", "× Triton", "ours config",
            "copy target", "faster than compile", "faster than Triton"]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rec in _sorted(doc.get("results", [])):
        impls, sp, v = rec.get("impls", {}), rec.get("speedup", {}), rec.get("verdict", {})
        ours = impls.get("mxfp6c") or {}
        row = [rec["kernel"], _shape(rec), _num(rec["min_bytes"] / 1e6, ".1f"),
               _num((rec.get("copy_same_size") or {}).get("tbps"), ".2f"), _us(ours), _cell_tbps(ours),
               _num(ours["copy_ratio"] * 100 if ours.get("copy_ratio") is not None else None, ".1f")]
        row += [_cell_tbps(impls.get(b)) for b in BASELINES]
        row += [_num(sp.get(b), ".2f") for b in BASELINES]
        row += [ours.get("config", "—"), _target_cell(rec, v.get("copy", "—")), v.get("torch_compile", "—"),
                v.get("triton", "—")]
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    out += _standing(doc) + _tuned_table(doc)
    out += _schedules_table(doc) + _launches_table(doc) + _baselines_table(doc) + _amd_table(doc) + _host_table(doc)
    out += _problems(doc)
    return "\n".join(out) + "\n"


def _standing(doc):
    """How many kernel/shapes meet each target, and every miss with what it lacks: the copy
    targets in points of copy and in µs (the time that would meet it, at the copy bandwidth of
    the call that measured it), the baselines in how much slower ours is."""
    recs = _sorted(doc.get("results", []))
    judged = [r for r in recs if (r.get("verdict") or {}).get("copy") in ("pass", "miss")]
    unjudged = [r["name"] for r in recs if r.get("tokens", 0) >= TARGETS["copy_ratio_min_tokens"]
                and (r.get("verdict") or {}).get("copy") not in ("pass", "miss", "n/a")]
    out = ["", "## Targets: the standing, and each miss by how much", "",
           f"Copy targets (at T ≥ {TARGETS['copy_ratio_min_tokens']} tokens): "
           f"{sum(r['verdict']['copy'] == 'pass' for r in judged)} of {len(judged)} kernel/shapes pass"
           + (f"; {len(unjudged)} more have no valid result of ours (each a miss): {', '.join(unjudged)}"
              if unjudged else "") + "."]
    for b in TARGETS["faster_than"]:
        verdicts = [(r.get("verdict") or {}).get(b, "") for r in recs]
        faced = [v for v in verdicts if v.startswith(("pass", "miss"))]
        failed = sum(v.startswith("pass") and "failed its check" in v for v in faced)
        out.append(f"Faster than {LABELS[b]}: {sum(v.startswith('pass') for v in faced)} of {len(faced)} kernel/shapes "
                   "with a valid result of ours and a timed baseline"
                   + (f" ({failed} of them against a baseline that failed its check)" if failed else "") + ".")
    copy_misses, baseline_misses = [], []
    for rec in recs:
        v, ours = rec.get("verdict") or {}, rec.get("impls", {}).get("mxfp6c") or {}
        if v.get("copy") == "miss":
            target = copy_target(rec)
            ceiling = copy_ceiling_of(doc, rec)
            at_target_us = rec["min_bytes"] / (target * ceiling * 1e12) * 1e6 if ceiling else None
            copy_misses.append(f"| {rec['kernel']} | {_shape(rec)} | {target * 100:.0f} | "
                               f"{ours['copy_ratio'] * 100:.1f} | {(target - ours['copy_ratio']) * 100:.1f} | "
                               f"{_us(ours)} | {_num(at_target_us, '.1f')} |")
        for b in TARGETS["faster_than"]:
            if v.get(b, "").startswith("miss"):
                base = rec["impls"][b]
                base_ms = baseline_ms(base)
                checked = "" if base.get("ok") else " ✗"
                baseline_misses.append(f"| {rec['kernel']} | {_shape(rec)} | {LABELS[b]} | {_us(ours)} | "
                                       f"{base_ms * 1e3:.1f}{checked} | {(ours['median_ms'] / base_ms - 1) * 100:.1f} |")
    if copy_misses:
        out += ["", "| kernel | shape | target % of copy | ours % of copy | short (points) | ours µs | µs at the target |",
                "|---|---|---|---|---|---|---|"] + copy_misses
    if baseline_misses:
        out += ["", "| kernel | shape | baseline | ours µs | baseline µs (its p10, else median; ✗ failed its check) | ours slower by % |",
                "|---|---|---|---|---|---|"] + baseline_misses
    return out


def _schedules_table(doc):
    out = ["", "## Every code object of ours", "",
           "† timed briefly only (the screen): not among the fastest of its kernel/shape, which were timed in full.",
           "", "| kernel | shape | config | µs (p10–p90) | TB/s | % copy | regs | check |", "|---|---|---|---|---|---|---|---|"]
    for rec in _sorted(doc.get("results", [])):
        for e in (rec.get("impls", {}).get("mxfp6c") or {}).get("all", []):
            spread = _us_spread(e) + (" †" if e.get("timing") == "screen" else "")
            check = "error: " + e["error"] if e.get("error") else ("ok" if e.get("ok") else "FAILED")
            out.append(f"| {rec['kernel']} | {_shape(rec)} | {e.get('config')} | {spread} | "
                       f"{_num(e.get('tbps'), '.2f')} | {_num((e.get('copy_ratio') or 0) * 100, '.1f')} | "
                       f"{(e.get('resources') or {}).get('registers', '—')} | {check} |")
    return out


TUNED_REGRET_TARGET = 0.02  # docs/architecture.md section 8: the tuner's winner within 2 % of the best plan


def _tuned_table(doc):
    # run.py --db: each key's selection beside the fastest plan this run timed (bench/tuned.py).
    rows, within, measured = [], 0, 0
    for rec in _sorted(doc.get("results", [])):
        t = (rec.get("impls", {}).get("mxfp6c") or {}).get("tuned")
        if t is None:
            continue
        ours = rec["impls"]["mxfp6c"]
        if t.get("regret") is None:
            rows.append(f"| {rec['kernel']} | {_shape(rec)} | {t.get('key', '—')} | {t.get('config', '—')} | — | "
                        f"{ours.get('config', '—')} | {_us(ours)} | — | {t.get('error', '?')} |")
            continue
        measured += 1
        ok = t["regret"] <= TUNED_REGRET_TARGET
        within += ok
        rows.append(f"| {rec['kernel']} | {_shape(rec)} | {t['key']} | {t['config']} | {_num(t['median_ms'] * 1e3, '.1f')} | "
                    f"{ours.get('config', '—')} | {_us(ours)} | {t['regret'] * 100:+.2f} % | {'✓' if ok else '✗'} |")
    if not rows:
        return []
    return ["", "## The tuner's winners (--db) beside the fastest plan", "",
            f"{within} of {measured} measured keys within {TUNED_REGRET_TARGET:.0%} of the fastest plan this run "
            f"timed; {len(rows) - measured} without a measurement (the last column says why). The key's plan is "
            "matched by its code objects' sha256 and its partials, and always timed in full.", "",
            "| kernel | shape | key | tuner's plan | its µs | fastest plan | its µs | regret | ≤ 2 % |",
            "|---|---|---|---|---|---|---|---|---|"] + rows


def _launches_table(doc):
    # What a multi-launch plan's reduction and launch boundaries cost (run.py time_each_launch).
    rows = []
    for rec in _sorted(doc.get("results", [])):
        ours = rec.get("impls", {}).get("mxfp6c") or {}
        stages = ours.get("stages") or []
        if len(stages) < 2 or any(st.get("alone_median_ms") is None for st in stages):
            continue
        alone = [st["alone_median_ms"] * 1e3 for st in stages]
        each = "; ".join(f"{st.get('kernel')} {st.get('config')}: {_num(a, '.1f')}" for st, a in zip(stages, alone))
        together = (ours.get("median_ms") or 0) * 1e3
        rows.append(f"| {rec['kernel']} | {_shape(rec)} | {each} | {_num(sum(alone), '.1f')} | "
                    f"{_num(together, '.1f')} | {_num(together - sum(alone), '.1f')} |")
    if not rows:
        return []
    return ["", "## The best multi-launch plans, each launch alone", "",
            "Each launch timed on its own like the plan (median, L2 cleared before every rep); the gap is the "
            "plan's time minus the sum: the launch boundaries, less what a launch alone reads from DRAM that the "
            "launch before it left in L2 within the plan.", "",
            "| kernel | shape | launches alone (µs) | sum µs | plan µs | gap µs |", "|---|---|---|---|---|---|"] + rows


def _first_call(e):
    """A baseline's first-call seconds: cold (a precompiling worker's, bench/precompile.py) / here."""
    here = _num(e.get("first_call_s"), ".1f")
    return f"{_num(e['precompiled_s'], '.1f')} / {here}" if e.get("precompiled_s") is not None else here


def _baselines_table(doc):
    # The baselines' spread beside ours: a wide one makes "faster than" at that shape less certain.
    out = ["", "## Baselines: configs, first-call cost and spread", "",
           "First call: compile (+ autotune), seconds on the host; where a worker compiled it first, its cold "
           "first call / the first call here from the caches.", "",
           "| kernel | shape | Triton config | Triton first call s (compile + autotune) | Triton µs (p10–p90) | "
           "ours µs (p10–p90) | torch.compile mode | torch.compile first call s | torch.compile µs (p10–p90) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for rec in _sorted(doc.get("results", [])):
        impls = rec["impls"]
        tri, comp = impls.get("triton") or {}, impls.get("torch_compile") or {}
        cfg = tri.get("config")
        cfg = ", ".join(f"{k}={v}" for k, v in cfg.items()) if isinstance(cfg, dict) else "—"
        out.append(f"| {rec['kernel']} | {_shape(rec)} | {cfg} | {_first_call(tri)} | "
                   f"{_us_spread(impls.get('triton'))} | {_us_spread(impls.get('mxfp6c'))} | "
                   f"{rec.get('compile_mode', '—')} | {_first_call(comp)} | "
                   f"{_us_spread(impls.get('torch_compile'))} |")
    return out


# Our code objects on AMD: bench/amd_resources.py compiles every benchmarked sm_90 object for these
# targets on the build machine (nothing here runs them) and writes a table, which a run joins to
# its best plans by code object file name (attach_amd_resources).
AMD_TARGETS = ("gfx942", "gfx950")


def occupancy_text(resources):
    occ = resources.get("occupancy")
    if not occ:
        return "-"
    return f"{occ['fraction'] * 100:.0f}% ({occ['programs_per_unit']}, {occ['limit']})"


def resource_cells(res):
    """Registers (VGPRs on AMD), SGPRs, shared memory (LDS) and occupancy of one target's compile;
    a refusal or an error in the first cell."""
    if "error" in res:
        return ["error: " + (res.get("reason") or res["error"].splitlines()[0]), "", "", ""]
    if "refused" in res:
        return ["refused: " + res["refused"], "", "", ""]
    mark = "".join(f" ({key}=0)" for key in res.get("dropped", []))
    mark += "".join(f" ({key}={value})" for key, value in res.get("lowered", {}).items())
    return [str(res.get("registers", "-")) + mark, str(res.get("sgprs", "-")), str(res.get("shared_bytes", "-")),
            occupancy_text(res)]


def attach_amd_resources(doc, rows, source):
    """Gives each best plan of ours the AMD resources of its code objects from an amd_resources
    table (rows, read from source; None: none, and any attached before are removed). A row whose
    sm_90 registers differ from the object this run loaded was compiled from other sources:
    marked stale, not silently shown as this object's."""
    by_name = {r["code_object"]: r for r in rows or () if r.get("code_object")}
    doc.pop("amd_resources", None)
    if rows is not None:
        doc["amd_resources"] = {"source": str(source), "named": bool(by_name)}
    for rec in doc.get("results", []):
        ours = rec.get("impls", {}).get("mxfp6c") or {}
        ours.pop("amd_resources", None)
        if rows is None or not ours.get("code_object"):
            continue
        stages = ours.get("stages") or [{"kernel": rec["kernel"], "config": ours.get("config"),
                                         "registers": (ours.get("resources") or {}).get("registers")}]
        names, found = ours["code_object"].split(" + "), []
        # Every launch of the plan, with or without a recorded stage.
        for name, stage in itertools.zip_longest(names, stages[:len(names)], fillvalue={}):
            entry = {"code_object": name, "launch": f"{stage.get('kernel', name)} {stage.get('config', '')}".strip()}
            row = by_name.get(name)
            if row is None:
                entry["missing"] = True
            else:
                entry.update({t: row.get(t, {}) for t in ("sm_90",) + AMD_TARGETS})
                ran = stage.get("registers")
                entry["registers_here"] = ran
                entry["stale"] = None if ran is None else entry["sm_90"].get("registers") != ran
            found.append(entry)
        ours["amd_resources"] = found
    return doc


def _amd_table(doc):
    attached = doc.get("amd_resources") or {}
    source = attached.get("source")
    missing = ("not in the table: run bench/amd_resources.py" if attached.get("named", True) else
               "the table names no code objects (written before the join): run bench/amd_resources.py")
    rows = []
    for rec in _sorted(doc.get("results", [])):
        for e in (rec.get("impls", {}).get("mxfp6c") or {}).get("amd_resources") or []:
            cells = [rec["kernel"], _shape(rec), e["launch"]]
            if e.get("missing"):
                cells += [missing] + [""] * 10
            else:
                sm90 = resource_cells(e["sm_90"])
                if e.get("stale"):
                    sm90[0] += f" (stale: {e['registers_here']} in this run)"
                elif e.get("stale") is None:
                    sm90[0] += " (not checked: this run's registers unknown)"
                cells += [sm90[0], sm90[2], sm90[3]]
                for t in AMD_TARGETS:
                    cells += resource_cells(e.get(t, {}))
            rows.append("| " + " | ".join(cells) + " |")
    if not rows:
        return []
    return ["", "## Our best plans' code objects on AMD", "",
            f"The same kernels at the same configurations compiled for gfx942 and gfx950 on the build machine "
            f"(not run: no AMD GPU here), from `{source}` (`bench/amd_resources.py`): registers / VGPRs, SGPRs, "
            "shared memory / LDS in bytes, estimated occupancy (resident warps or waves over the maximum; "
            "programs per SM or CU, and the bound). A row compiled from other sources than this run's objects "
            "(its sm_90 registers differ) is marked stale. Where a target refuses a tunable (ASYNC, PREDICATE, "
            "or a MINPROGS whose programs' shared memory a CU cannot hold), the row is the schedule without it, "
            "marked (…=0).", "",
            "| kernel | shape | launch | sm_90 regs | sm_90 shared | sm_90 occupancy | gfx942 VGPRs | gfx942 SGPRs "
            "| gfx942 LDS | gfx942 occupancy | gfx950 VGPRs | gfx950 SGPRs | gfx950 LDS | gfx950 occupancy |",
            "|" + "---|" * 14] + rows


def _host_table(doc):
    host = doc.get("host_launch")
    if not host:
        return []
    out = ["", "## Host time per launch (Python, one-program grid, best of loops)", ""]
    if host.get("error"):
        return out + [f"not measured: {host['error']}"]
    t = TARGETS["host_launch_python_us"]
    out += ["| path | µs per launch | target |", "|---|---|---|",
            f"| mxfp6c through the ops layer (C ABI), launches composed and checked once | {_num(host.get('mxfp6c_prepared_us'), '.2f')} | "
            f"≤ {t} through the Python op: {host.get('verdict_python_op', '—')} |",
            f"| mxfp6c through the ops layer (C ABI), composed and checked from the tensors every call | "
            f"{_num(host.get('mxfp6c_pack_each_call_us'), '.2f')} | — |",
            f"| Triton direct launch (fixed config, no autotuner) | {_num(host.get('triton_direct_us'), '.2f')} | — |",
            "", f"C++ launch (target ≤ {TARGETS['host_launch_cpp_us']} µs) is not measured here. Kernel: "
            f"{host.get('kernel', '?')} {host.get('config', '')}."]
    return out


def _problems(doc):
    out = []
    for rec in _sorted(doc.get("results", [])):
        for name, impl in rec.get("impls", {}).items():
            entries = [impl] + [dict(e, name=f"{name} {e.get('config')}") for e in impl.get("all", [])]
            for e in entries:
                if e.get("error"):
                    out.append(f"- {rec['name']} {e.get('name', name)}: error: {e['error']}")
                elif e.get("check") and not e["check"].get("ok"):
                    out.append(f"- {rec['name']} {e.get('name', name)}: check FAILED: {json.dumps(e['check'])}")
    out = sorted(set(out))
    for s in doc.get("skipped", []):
        out.append(f"- {s['name']}: not run ({s['why']})")
    return (["", "## Failures, errors, skipped", ""] + out) if out else []


# ---------------------------------------------------------------------------------------------
# Chart

def chart(doc, path):
    """Effective bandwidth per kernel and shape, ours against the baselines, with the copy
    ceiling and the kernel's target (90 % forward, 85 % backward and row packing, 80 % column
    and dual packing, 75 % the prologue) as lines, one panel per family, three to a row. Flagged
    (failed check) bars are hatched."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = _sorted(doc.get("results", []))
    families = list(dict.fromkeys(r["family"] for r in results))
    if not families:
        return False
    ncols = min(3, len(families))
    nrows = -(-len(families) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(7 * ncols, 5 * nrows), squeeze=False)
    axes = [ax for row in axes for ax in row]
    for ax in axes[len(families):]:
        ax.set_visible(False)
    ceiling = doc.get("copy", {}).get("ceiling_tbps")
    width = 0.8 / len(IMPLS)
    for ax, family in zip(axes, families):
        recs = [r for r in results if r["family"] == family]
        target = copy_target(recs[0])
        for i, impl in enumerate(IMPLS):
            for j, rec in enumerate(recs):
                e = rec["impls"].get(impl) or {}
                if e.get("tbps") is None:
                    continue
                ax.bar(j + (i - (len(IMPLS) - 1) / 2) * width, e["tbps"], width, color=f"C{i}",
                       hatch="//" if not e.get("ok") else None, label=LABELS[impl] if j == 0 else None)
        if ceiling:
            ax.axhline(ceiling, color="k", linestyle="--", linewidth=1, label=f"device copy {ceiling:.2f} TB/s")
            ax.axhline(ceiling * target, color="k", linestyle=":", linewidth=1,
                       label=f"{target:.0%} of copy (target)")
        ax.set_xticks(range(len(recs)))
        ax.set_xticklabels([r["label"].replace(" ", "\n", 1) for r in recs], fontsize=8)
        ax.set_title(family, fontsize=10)
        ax.set_ylabel("effective bandwidth, TB/s")
        top = max([ceiling or 0] + [(r["impls"].get(i) or {}).get("tbps") or 0 for r in recs for i in IMPLS])
        ax.set_ylim(0, top * 1.1 or 1)
    # One legend for all panels, below them, so it never hides a bar.
    handles = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=len(handles), fontsize=8)
    fig.suptitle(f"{doc.get('environment', {}).get('gpu', '')} {doc.get('date', '')}: minimal bytes / median time "
                 "(hatched: failed its check)")
    fig.tight_layout(rect=(0, 0.07 / nrows, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


def render(doc, out_dir, stem, with_chart=True):
    """Writes <stem>.md (and <stem>.png) of `doc` into out_dir; returns the Markdown."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    finalize(doc)
    if with_chart:
        try:
            if chart(doc, out_dir / f"{stem}.png"):
                doc["chart"] = f"{stem}.png"
        except Exception as e:  # the numbers matter more than the picture
            doc["chart_error"] = f"{type(e).__name__}: {e}"
    md = wrap_markdown(markdown(doc))
    (out_dir / f"{stem}.md").write_text(md)
    return md


def write(doc, out_dir, stem, with_chart=True):
    """Writes <stem>.json beside render()'s files; returns the Markdown."""
    md = render(doc, out_dir, stem, with_chart)
    (pathlib.Path(out_dir) / f"{stem}.json").write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return md


def main():
    """Draws a run's .md and .png again from its .json (or .json.gz): for a call cut short before
    its chart, or after a change to this file. The JSON itself is left as it is."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("json", help="a run's <stem>.json or <stem>.json.gz")
    ap.add_argument("--out", default=None, help="folder for <stem>.md and .png (default: the JSON's)")
    ap.add_argument("--no-chart", action="store_true", help="the Markdown only (no matplotlib needed)")
    args = ap.parse_args()
    out, stem = pathlib.Path(args.out or pathlib.Path(args.json).parent), doc_stem(args.json)
    render(read_doc(args.json), out, stem, with_chart=not args.no_chart)
    print(f"wrote {out / stem}.md" + ("" if args.no_chart else ", .png"))


if __name__ == "__main__":
    main()

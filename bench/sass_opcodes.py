#!/usr/bin/env python3
"""Per-opcode totals of an Nsight Compute source page: warp instructions executed, stall samples,
shared-memory wavefronts against their ideal, and L2 sectors -- what tells a bank conflict (more
wavefronts than ideal) or the instruction that waits on a load (its stall samples).

    ncu -i REPORT.ncu-rep --page source --print-source sass --csv > REPORT.sass.csv
    python3 bench/sass_opcodes.py REPORT.sass.csv [--top 25]
"""
import argparse
import collections
import csv


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    rows = list(csv.reader(open(args.csv)))
    header = rows[1]  # row 0 names the kernel
    col = {name: i for i, name in enumerate(header)}
    fields = ("Instructions Executed", "Warp Stall Sampling (All Samples)", "L1 Wavefronts Shared",
              "L1 Wavefronts Shared Ideal", "L2 Theoretical Sectors Global")
    totals = collections.defaultdict(lambda: [0.0] * len(fields))
    for r in rows[2:]:
        if len(r) < len(header):
            continue
        words = r[col["Source"]].split()
        if not words:
            continue
        op = (words[1] if words[0].startswith("@") and len(words) > 1 else words[0]).split(".")[0]
        for i, f in enumerate(fields):
            if f in col:  # a kernel without shared memory has no shared-memory columns
                totals[op][i] += number(r[col[f]])
    inst = sum(t[0] for t in totals.values()) or 1
    samples = sum(t[1] for t in totals.values()) or 1
    print(f"warp instructions {inst:.0f}, stall samples {samples:.0f}")
    print("| opcode | warp instructions | % | stall samples | % | shared wavefronts | ideal | L2 sectors |")
    print("|---|---|---|---|---|---|---|---|")
    for op, t in sorted(totals.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"| {op} | {t[0]:.0f} | {100 * t[0] / inst:.1f} | {t[1]:.0f} | {100 * t[1] / samples:.1f} | "
              f"{t[2]:.0f} | {t[3]:.0f} | {t[4]:.0f} |")


if __name__ == "__main__":
    main()

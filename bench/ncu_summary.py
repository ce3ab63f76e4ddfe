#!/usr/bin/env python3
"""One table of what bounds each profiled launch, from Nsight Compute's raw page of a
bench/ncu_breakdown.sh run: its time, the busiest L2 and DRAM sub-units (% of their peak), and
the L2's read and write sectors per request (32-byte sectors; 4 per request is a warp's
whole 128-byte lines).

    python3 bench/ncu_summary.py OUT.txt > OUT.md
"""
import re
import sys

METRIC = re.compile(r"^\s+(\w+__\S+)\s+(?:(\S+)\s+)?([\d.,]+)$")
TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def launches(lines):
    """[(kernel name, {metric: value})] in profile order: a launch's block is its name and grid,
    then a "Metric Name" header, then one line per metric."""
    found, previous = [], ""
    for line in lines:
        line = line.rstrip("\n")
        if line.strip().startswith("Metric Name"):
            name = re.match(r"(?:void )?(?:[\w:]+::)?(\w+)", previous.strip())
            found.append((name.group(1) if name else previous.strip(), {}))
        elif found and (m := METRIC.match(line)):
            value = float(m.group(3).replace(",", ""))
            found[-1][1][m.group(1)] = value * TO_US.get(m.group(2), 1.0) if m.group(1).startswith("gpu__time") else value
        if line.strip():
            previous = line
    return found


def top(metrics, prefix, n):
    pct = {k: v for k, v in metrics.items() if k.startswith(prefix) and k.endswith(".avg.pct_of_peak_sustained_elapsed")}
    return sorted(pct.items(), key=lambda kv: -kv[1])[:n]


def per_request(metrics, op):
    sectors = metrics.get(f"lts__t_sectors_srcunit_tex_op_{op}.sum", 0)
    requests = metrics.get(f"lts__t_requests_srcunit_tex_op_{op}.sum", 0)
    return f"{sectors / 1e6:.2f} M / {sectors / requests:.2f}" if requests else "-"


def main():
    rows = launches(open(sys.argv[1]))
    print("| launch | µs | busiest L2 units (% of peak) | DRAM active % | L2 read sectors / per request "
          "| L2 write sectors / per request | DRAM read / write MB |")
    print("|---|---|---|---|---|---|---|")
    for name, m in rows:
        units = ", ".join(f"{k.split('.')[0].removeprefix('lts__')} {v:.1f}" for k, v in top(m, "lts__", 3))
        dram = m.get("dram__cycles_active.avg.pct_of_peak_sustained_elapsed", 0)
        us = m.get("gpu__time_duration.sum", 0)
        mb = f"{m.get('dram__bytes_read.sum', 0):.1f} / {m.get('dram__bytes_write.sum', 0):.1f}"
        print(f"| {name} | {us:.1f} | {units} | {dram:.1f} | {per_request(m, 'read')} | {per_request(m, 'write')} | {mb} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Which unit of the L2 and the DRAM bounds a kernel: Nsight Compute's throughput metrics broken
# down into their sub-metrics (each a % of its own peak; the unit at the top is the limiter), with
# the L2's read and write sectors and requests, for the launches of profile_plans.py whose kernel
# name matches a regex.
#
#   bench/ncu_breakdown.sh OUT KERNEL_REGEX PROFILE_PLANS_ARGS...
#   bench/ncu_breakdown.sh $OUT/dual 'mxfp6_pack_dual|vectorized_elementwise' \
#       --only mxfp6_pack_dual:E3M2:T=16384:C=3072 --config W=128,HB=4,ROWS=1,THREADS=256,VEC=32 --reps 1 --copy
#
# Writes OUT.ncu-rep, OUT.txt (the raw page: every metric of every profiled launch) and OUT.md
# (bench/ncu_summary.py's table of it).
set -euo pipefail
out=$1 kernels=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
metrics=(
  breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed
  breakdown:dram__throughput.avg.pct_of_peak_sustained_elapsed
  lts__t_sectors_srcunit_tex_op_read.sum lts__t_sectors_srcunit_tex_op_write.sum
  lts__t_requests_srcunit_tex_op_read.sum lts__t_requests_srcunit_tex_op_write.sum
  lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum
  dram__bytes_read.sum dram__bytes_write.sum gpu__time_duration.sum
  sm__throughput.avg.pct_of_peak_sustained_elapsed
)
ncu --clock-control none --profile-from-start off -k "regex:$kernels" \
  --metrics "$(IFS=,; echo "${metrics[*]}")" -f -o "$out" python3 "$here/profile_plans.py" "$@"
ncu -i "$out.ncu-rep" --page raw > "$out.txt"
python3 "$here/ncu_summary.py" "$out.txt" > "$out.md"

#!/bin/bash
# The Python ops' GPU run (tests/gpu/python/bundle.sh packs BUNDLE): ops_test.py, the launch
# overhead benchmark and examples/flux_block.py, their logs and JSON into OUTDIR. STEPS picks
# some of "ops launch flux"; T_OPS, T_LAUNCH, T_FLUX bound each step's seconds.
bundle=${1:-.gpu46}
out=${2:?usage: tests/gpu/python/run.sh BUNDLE OUTDIR}
mkdir -p "$out"
source "$bundle/lib/env.sh"  # the packed libraries (scripts/pack-client-libs.sh)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python:$PWD/bench
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/card.txt"
for step in ${STEPS:-ops launch flux}; do
  case $step in
    ops) timeout "${T_OPS:-300}" python3 tests/gpu/python/ops_test.py --db "$bundle/ops.db" --json "$out/ops.json" > "$out/ops.log" 2>&1
         echo "ops rc=$?";;
    launch) timeout "${T_LAUNCH:-120}" python3 bench/launch_overhead.py --db "$bundle/ops.db" \
              --launch-bench "$bundle/bin/launch_bench" --json "$out/launch.json" > "$out/launch.log" 2>&1
            echo "launch rc=$?";;
    flux) timeout "${T_FLUX:-240}" python3 examples/flux_block.py --db "$bundle/ops.db" --json "$out/flux.json" > "$out/flux.log" 2>&1
          echo "flux rc=$?";;
  esac
done
cat "$out/card.txt" "$out/load.txt"
for f in ops launch flux; do [ -f "$out/$f.log" ] && { echo "== $f"; grep -v "^ok" "$out/$f.log" | tail -40; }; done
exit 0

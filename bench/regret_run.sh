#!/bin/bash
# The tuner's regret run on a GPU machine (bench/pack_regret.sh packs BUNDLE): mxfp6-tune on the
# benchmark's T = 16384 Flux keys (shapes/regret-t16384.json) from the bundle's database, printing
# each key's seconds of inputs, gate and timing; mxfp6-db check of the result; then bench/run.py
# timing every plan of ours on the same kernel/shapes beside the tuner's winners (--db): each
# winner's regret. Logs, the tuned database's export and the harness's record go to OUTDIR.
#   TUNE_BUDGET: the tuner's --budget in seconds (default 400); RUN_SECONDS: the whole run's
#   seconds, of which the harness takes what the tuner left (default 545).
#   usage: bash bench/regret_run.sh BUNDLE OUTDIR
set -u
bundle=${1:?usage: bench/regret_run.sh BUNDLE OUTDIR}
out=${2:?usage: bench/regret_run.sh BUNDLE OUTDIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/card.txt"
source "$bundle/lib/env.sh"
db=$(mktemp -d)/kernels.db
cp "$bundle/kernels.db" "$db"
/usr/bin/time -v "$bundle/bin/mxfp6-tune" --db "$db" --shapes shapes/regret-t16384.json --target sm_90 \
  --dsl-dir "$bundle/kernels_dsl" --device 0 --budget "${TUNE_BUDGET:-400}" > "$out/tune.log" 2> "$out/tune.time"
echo "tune rc=$?"
grep -h "^tuned" "$out/tune.log"; grep "Elapsed" "$out/tune.time"
"$bundle/bin/mxfp6-db" check --db "$db" > "$out/check.log" 2>&1; tail -1 "$out/check.log"
"$bundle/bin/mxfp6-db" export --json --db "$db" | gzip > "$out/tune-export.json.gz"
budget=$((${RUN_SECONDS:-545} - SECONDS)); echo "harness budget ${budget} s"
PYTHONUNBUFFERED=1 python3 bench/run.py --lib "$bundle/lib/libmxfp6rt.so" --kernels build/gpu_kernels --db "$db" \
  --skip torch_compile --skip triton --time-budget "$budget" --out "$out" --tag regret \
  --only ln_modulate_fwd:T=16384 --only ln_modulate_bwd:T=16384 --only norm_rope_fwd:rows=393216 \
  --only norm_rope_bwd:rows=393216 --only norm_rope_qkv_fwd:rows=393216 --only norm_rope_qkv_bwd:rows=393216 \
  --only norm_rope_qkv_bwd_pack:E3M2:rows=393216:megatron --only mxfp6_pack_rows:E3M2:T=16384:C=3072 \
  --only mxfp6_pack_cols:E3M2:T=16384:C=3072 --only mxfp6_pack_dual:E3M2:T=16384:C=3072 > "$out/run.log" 2>&1
echo "run rc=$?"; tail -5 "$out/run.log"

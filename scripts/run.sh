#!/usr/bin/env bash
# Fresh machine to the main job: install packages, build, then
#   1. precompile every candidate plan of the Flux.1 12B shape set (shapes/flux12b.json: training
#      micro-batches 16, 32, 64 and an evaluation width) for sm_90, gfx942 and gfx950 into the
#      embedded kernel database var/kernels.db (a second run compiles nothing) and check it;
#   2. start the kernel server on loopback over that database;
#   3. fetch one training process's startup set (shapes/flux12b-startup-b16.json: every op the
#      57 blocks call) through the client into a fresh node cache, then again from the warm
#      cache, printing what resolved exactly, by nearest shape or by default, the code objects,
#      the bytes on the wire and the time;
#   4. stop the server.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
mkdir -p var
build/bin/mxfp6c precompile --shapes shapes/flux12b.json --targets sm_90,gfx942,gfx950 --db var/kernels.db
build/bin/mxfp6-db check --db var/kernels.db

work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# Port 0: the kernel picks a free one; the server's first line says which.
build/bin/mxfp6-server --db var/kernels.db --listen 127.0.0.1:0 > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 100); do
  grep -q "listening on" "$work/server.out" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.1
done
address=$(sed -n 's/^mxfp6-server: listening on \([^ ]*\).*/\1/p' "$work/server.out")
[ -n "$address" ] || { echo "the server did not come up" >&2; cat "$work/server.log" >&2; exit 1; }
echo "server: $address"

for cache in cold warm; do
  echo "fetch ($cache node cache):"
  build/bin/mxfp6c fetch --server "$address" --shapes shapes/flux12b-startup-b16.json --target sm_90 \
    --cache "$work/node-cache"
done

kill -TERM "$server_pid"
wait "$server_pid"
server_pid=""
echo "server stopped; its requests:"
grep -c "BatchResolve OK" "$work/server.log" | sed 's/^/  BatchResolve OK: /'

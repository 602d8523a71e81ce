#!/usr/bin/env bash
# Installs what is missing, builds granary, and runs its main job on the embedded defaults:
# every example manifest is decoded and checked as the API server would (defaults, bounds,
# cross-field rules) and summarized, this machine's GPUs are probed and self-tested, and
# granary-cache-node warms a sample Dataset (examples/local/dataset.yaml) standalone, showing
# its progress.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
GRANARY_BUILD_TARGET=granaryctl scripts/build.sh build >/dev/null
GRANARY_BUILD_TARGET=granary-cache-node scripts/build.sh build >/dev/null
echo
build/cli/granaryctl validate -f examples
echo
build/cli/granaryctl doctor

echo
demo=/var/tmp/granary-demo
if [[ ! -f $demo/origin.done ]]; then  # 64 sample files, 256 MiB in all
  mkdir -p "$demo/origin/train"
  for i in $(seq -w 0 63); do head -c 4194304 /dev/urandom >"$demo/origin/train/shard-$i.bin"; done
  touch "$demo/origin.done"
fi
rm -rf "$demo/state"  # warm from scratch each run
build/cache-node/granary-cache-node --state-dir "$demo/state" --listen 127.0.0.1:0 \
  --metrics-address "" --log-level warn --dataset examples/local/dataset.yaml --exit-when-warm

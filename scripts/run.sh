#!/usr/bin/env bash
# Installs what is missing, builds granary, and runs its main job on one machine: a TrainingJob
# with two trainers over a Dataset (examples/local/job.yaml) under `granaryctl run`. The origin
# (256 MiB of sample files) is read at a tenth of the trainers' demand, so the first epoch
# waits on it while the cache warms beside it, and the second is fed from the cache. The cache
# starts empty each time (/var/tmp/granary-demo/cache); docs/local.md says more.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
for target in granaryctl granary-trainer; do
  GRANARY_BUILD_TARGET=$target scripts/build.sh build >/dev/null
done
echo
build/cli/granaryctl doctor

demo=/var/tmp/granary-demo
if [[ ! -f $demo/origin.done ]]; then  # 64 sample files, 256 MiB in all
  mkdir -p "$demo/origin/train"
  for i in $(seq -w 0 63); do head -c 4194304 /dev/urandom >"$demo/origin/train/shard-$i.bin"; done
  touch "$demo/origin.done"
fi
rm -rf "$demo/cache"  # warm from scratch each run
echo
PATH="$PWD/build/examples/trainer:$PATH" \
  build/cli/granaryctl run -f examples/local/job.yaml --cache-dir "$demo/cache" \
  --run-dir /tmp/granary-demo-run

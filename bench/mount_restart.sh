#!/usr/bin/env bash
# How long readers of a `granaryctl mount` fail while it is stopped (SIGINT) and started again:
# three readers loop over three files of a 50-file dataset; prints the failed reads, the window
# from the first failure to the last, and the errors seen. Needs root and /dev/fuse.
#   bench/mount_restart.sh [GRANARYCTL] [RUNS]
set -euo pipefail
granaryctl=$(realpath "${1:-build/cli/granaryctl}")
runs=${2:-3}
root=$(mktemp -d /tmp/granary-restart.XXXXXX)
trap 'umount -l "$root/mnt" 2>/dev/null || true; rm -rf "$root"' EXIT
mkdir -p "$root/origin" "$root/mnt"
for i in $(seq 1 50); do head -c 300000 /dev/urandom > "$root/origin/f$i.bin"; done
cat > "$root/dataset.yaml" <<YAML
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: sample, namespace: default}
spec:
  source: {uri: "file://$root/origin/"}
  cache: {chunkSize: 1Mi}
YAML
mounted() { grep -q " $root/mnt fuse.granary " /proc/self/mounts; }
for run in $(seq 1 "$runs"); do
  rm -rf "$root/state" "$root/failures" "$root/errors"
  "$granaryctl" mount -f "$root/dataset.yaml" --state-dir "$root/state" "$root/mnt" 2>/dev/null &
  old=$!
  for _ in $(seq 1 100); do mounted && break; sleep 0.05; done
  sleep 1
  (
    end=$((SECONDS + 4))
    while ((SECONDS < end)); do
      for i in 1 2 3; do
        cat "$root/mnt/f$i.bin" > /dev/null 2>> "$root/errors" || date +%s.%N >> "$root/failures"
      done
    done
  ) &
  readers=$!
  sleep 1
  kill -INT "$old"
  wait "$old"
  "$granaryctl" mount -f "$root/dataset.yaml" --state-dir "$root/state" "$root/mnt" 2>/dev/null &
  new=$!
  wait "$readers"
  failed=$(wc -l < "$root/failures" 2>/dev/null || echo 0)
  window=0
  if ((failed > 0)); then
    window=$(python3 -c "import sys; t=[float(l) for l in open(sys.argv[1])]; print(f'{max(t)-min(t):.3f}')" "$root/failures")
  fi
  errors=$(sed 's/.*: //' "$root/errors" 2>/dev/null | sort -u | paste -sd, -)
  echo "run $run: $failed failed reads over ${window} s (${errors:-no errors})"
  kill -INT "$new"
  wait "$new"
done

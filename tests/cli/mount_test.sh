#!/usr/bin/env bash
# granaryctl mount / unmount end to end: a Dataset over a file origin mounted read-only, every
# file compared with the origin (a symlink within it read through, one leading out of the
# directory the manifest names left out), refused writes, then unmounted from another command;
# the mount command exits 0 and reports its reader. Skips (exit 77) without root or /dev/fuse.
set -euo pipefail
granaryctl="$1"
if [[ $(id -u) != 0 || ! -w /dev/fuse ]]; then
  echo "skipped: FUSE mounts need root and /dev/fuse"
  exit 77
fi
root=$(mktemp -d /tmp/granaryctl-mount.XXXXXX)
trap 'umount -l "$root/mnt" 2>/dev/null || true; kill %1 2>/dev/null || true; rm -rf "$root"' EXIT
mkdir -p "$root/origin/train" "$root/mnt"
for i in $(seq 1 20); do head -c $((i * 7919)) /dev/urandom > "$root/origin/train/part-$i.bin"; done
head -c 5000000 /dev/urandom > "$root/origin/big.bin"
echo "outside the dataset" > "$root/outside.txt"
ln -s ../outside.txt "$root/origin/leak"       # leads out of what the manifest names
ln -s train/part-1.bin "$root/origin/within"  # stays within it
cat > "$root/dataset.yaml" <<YAML
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: sample, namespace: default}
spec:
  source: {uri: "file://$root/origin/"}
  cache: {chunkSize: 1Mi}
YAML

"$granaryctl" unmount "$root/mnt" 2> "$root/not-mounted.txt" && exit 1
grep -q "is not a granary mount" "$root/not-mounted.txt"

"$granaryctl" mount -f "$root/dataset.yaml" --state-dir "$root/state" "$root/mnt" 2> "$root/log.txt" &
for _ in $(seq 1 100); do
  grep -q " $root/mnt fuse.granary " /proc/self/mounts && break
  sleep 0.1
done
grep -q " $root/mnt fuse.granary " /proc/self/mounts || { cat "$root/log.txt"; exit 1; }

diff -r -x leak "$root/origin" "$root/mnt"  # names, and every byte
if [[ -e "$root/mnt/leak" ]]; then echo "a symlink out of the dataset was served"; exit 1; fi
if touch "$root/mnt/new" 2> /dev/null; then echo "a write succeeded"; exit 1; fi

"$granaryctl" unmount "$root/mnt"
wait %1  # the mount command ends by itself, successfully
grep -q "unmounted $root/mnt" "$root/log.txt"
grep -Eq "^  diff \(1 reader\): [0-9]+ reads, .* waited [0-9.]+ s$" "$root/log.txt"  # readers by command
if grep -q " $root/mnt " /proc/self/mounts; then echo "still mounted"; exit 1; fi
echo "ok: mounted, compared, unmounted"

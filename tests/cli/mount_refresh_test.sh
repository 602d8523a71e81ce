#!/usr/bin/env bash
# granaryctl mount --refresh end to end: a Dataset over a file origin, Ready; then a file added,
# one rewritten and one removed at the origin. A mount without --refresh still serves the version
# cached; one with --refresh lists the origin again and serves what it holds now, byte for byte,
# and so does every mount after it; a refresh of an unchanged origin makes no version; a mount
# killed -9 during a refresh leaves a version whole. Skips (exit 77) without root or /dev/fuse.
set -Eeuo pipefail
granaryctl="$1"
if [[ $(id -u) != 0 || ! -w /dev/fuse ]]; then
  echo "skipped: FUSE mounts need root and /dev/fuse"
  exit 77
fi
root=$(mktemp -d /tmp/granaryctl-refresh.XXXXXX)
trap 'umount -l "$root/mnt" 2>/dev/null || true; kill %1 2>/dev/null || true; rm -rf "$root"' EXIT
# A step that fails says which, with what granaryctl logged.
trap 'echo "FAILED at line $LINENO (exit $?); granaryctl logged:"; cat "$root/log.txt" 2>/dev/null' ERR
mkdir -p "$root/origin/shards" "$root/mnt"
echo one > "$root/origin/a.txt"
echo two > "$root/origin/b.txt"
for i in $(seq 1 10); do head -c $((i * 7919)) /dev/urandom > "$root/origin/shards/$i.bin"; done
cat > "$root/dataset.yaml" <<YAML
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: sample, namespace: default}
spec:
  source: {uri: "file://$root/origin/"}
YAML

# Mounts with the given flags and waits until the dataset is Ready there.
mount_ready() {
  "$granaryctl" mount -f "$root/dataset.yaml" --state-dir "$root/state" "$@" "$root/mnt" \
    2> "$root/log.txt" &
  for _ in $(seq 1 1200); do
    grep -q "default/sample Ready" "$root/log.txt" && return 0
    sleep 0.1
  done
  cat "$root/log.txt"
  exit 1
}
unmount() {
  "$granaryctl" unmount "$root/mnt"
  wait %1
}

mount_ready
diff -r "$root/origin" "$root/mnt"
unmount
cp -r "$root/origin" "$root/before"

echo "one, fixed" > "$root/origin/a.txt"
echo three > "$root/origin/c.txt"
rm "$root/origin/b.txt"

mount_ready  # without --refresh: the version cached
diff -r "$root/before" "$root/mnt"
unmount

mount_ready --refresh
grep -q "default/sample refreshed: version 2, 1 added, 1 changed, 1 removed, 10 unchanged" \
  "$root/log.txt" || { cat "$root/log.txt"; exit 1; }
diff -r "$root/origin" "$root/mnt"
unmount

cp -r "$root/origin" "$root/version-2"
echo four > "$root/origin/d.txt"
mount_ready  # the newest version is served, not the origin as it is now
diff -r "$root/version-2" "$root/mnt"
unmount
rm "$root/origin/d.txt"

mount_ready --refresh
grep -q "default/sample refreshed: the origin is unchanged (12 files)" "$root/log.txt" ||
  { cat "$root/log.txt"; exit 1; }
diff -r "$root/origin" "$root/mnt"
unmount

# kill -9 in the middle of a refresh (once it says it is listing): the next mount serves a
# version whole, never a mixed listing, and a refresh after it serves the origin byte for byte.
python3 - "$root/origin/many" <<'PY'
import os, sys
for d in range(20):
    os.makedirs(f"{sys.argv[1]}/{d}")
    for f in range(1000):
        with open(f"{sys.argv[1]}/{d}/{f}", "w") as out:
            out.write(str(d * 1000 + f))
PY
"$granaryctl" mount -f "$root/dataset.yaml" --state-dir "$root/state" --refresh "$root/mnt" \
  2> "$root/log.txt" &
for _ in $(seq 1 1000); do
  grep -q "refreshing: " "$root/log.txt" && break
  sleep 0.01
done
kill -9 %1
wait %1 2>/dev/null || true
grep -q "refreshing: " "$root/log.txt" || { cat "$root/log.txt"; exit 1; }
mount_ready
if diff -rq "$root/version-2" "$root/mnt" > /dev/null; then
  echo "killed during the refresh: version 2 served"
else
  diff -r "$root/origin" "$root/mnt"
  echo "killed after the refresh: version 3 served"
fi
unmount
echo five > "$root/origin/e.txt"  # a change after the kill: the next refresh lists from the start
mount_ready --refresh
grep -Eq "default/sample refreshed: (version 3, 20001 added, 0 changed, 0 removed, 12 unchanged|version 4, 1 added, 0 changed, 0 removed, 20012 unchanged)" \
  "$root/log.txt" || { cat "$root/log.txt"; exit 1; }
diff -r "$root/origin" "$root/mnt"
unmount
echo "ok: the cached version kept, the origin's changes served after --refresh, kill -9 survived"

#!/usr/bin/env bash
# granaryctl run with spec.checkpoints, end to end: what the POSIX writers of training frameworks do
# (concurrent mkdir -p, a file a rank overwritten with O_TRUNC, DCP's .metadata.tmp renamed into
# place, safetensors' temp file renamed over its target then chmod, rmtree rotation) reaches the
# file:// origin byte for byte before the run ends; a run on another machine (a new cache
# directory) finds every file restored; a kill -9 mid-drain loses nothing and shows nothing partial;
# a disk too small for the restore is named before any worker starts; and, where Debian's
# python3-torch is installed, a real two-worker PyTorch job (examples/checkpoints/train_dcp.py)
# that loses a worker resumes from its newest checkpoint with the same losses as an uninterrupted
# run.
# Usage: checkpoint_run_test.sh GRANARYCTL SOURCE_DIR. Skips (exit 77) without root or /dev/fuse.
set -euo pipefail
granaryctl="$1"
source_dir="$2"
if [[ $(id -u) != 0 || ! -w /dev/fuse ]]; then
  echo "skipped: FUSE mounts need root and /dev/fuse"
  exit 77
fi
root=$(mktemp -d /tmp/granaryctl-checkpoints.XXXXXX)
marker="granary-checkpoint-test-$$"
cleanup() {
  pkill -KILL -f "$marker" 2>/dev/null || true
  grep " $root/" /proc/self/mounts | cut -d' ' -f2 | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
mkdir -p "$root/data"
head -c 4096 /dev/urandom > "$root/data/sample.bin"
fail() { echo "FAILED: $*"; exit 1; }

# job NAME URI EXTRA_ENV COMMAND [CHECKPOINT_FIELDS]: a Dataset and a two-worker TrainingJob whose
# checkpoints go to URI, its workers running COMMAND (YAML flow items).
job() {
  cat <<YAML
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: sample, namespace: default}
spec:
  source: {uri: "file://$root/data/"}
---
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: $1, namespace: default}
spec:
  datasets: [{name: sample, mountPath: /data}]
  checkpoints: {uri: "$2", mountPath: /ckpt${5:-}}
  workers: 2
  gpusPerWorker: 0
  runPolicy: {backoffLimit: 1}
  template:
    spec:
      containers:
        - name: trainer
          image: unused-locally
          command: [$4]
          env: [{name: CHECKPOINTS, value: /ckpt}, {name: MARKER, value: $marker}$3]
YAML
}

# run NAME MACHINE: runs $root/NAME.yaml with MACHINE's cache directory, keeping the output in
# $root/NAME.out and the exit code in $code.
run() {
  set +e
  "$granaryctl" run -f "$root/$1.yaml" --cache-dir "$root/cache-$2" --run-dir "$root/run-$1" \
    > "$root/$1.out" 2>&1
  code=$?
  set -e
  echo "--- $1 on $2: exit $code"
  cat "$root/$1.out"
}

# same TREE ORIGIN: every file and byte alike, granary's staging directory aside.
same() { diff -r -x .granary-staging "$1" "$2"; }

# 1. The writers of real frameworks, from both workers at once.
cat > "$root/save.sh" <<'SH'
set -e
c=$CHECKPOINTS
for step in 1 2 3; do
  mkdir -p "$c/checkpoint-$step/shards"                        # every rank at once
  head -c $((300000 + RANK)) /dev/urandom > "$c/checkpoint-$step/shards/rank-$RANK.pt"
  head -c 70000 /dev/urandom > "$c/checkpoint-$step/shards/rank-$RANK.pt"  # O_TRUNC over it
  if [ "$RANK" = 0 ]; then
    head -c 5000 /dev/urandom > "$c/checkpoint-$step/model.safetensors.tmp"
    mv "$c/checkpoint-$step/model.safetensors.tmp" "$c/checkpoint-$step/model.safetensors"
    chmod 600 "$c/checkpoint-$step/model.safetensors"
    sleep 0.3
    echo "step $step" > "$c/checkpoint-$step/.metadata.tmp"
    mv "$c/checkpoint-$step/.metadata.tmp" "$c/checkpoint-$step/.metadata"
    echo "checkpoint-$step" > "$c/latest.tmp" && mv "$c/latest.tmp" "$c/latest"
    [ "$step" -gt 2 ] && rm -rf "$c/checkpoint-$((step - 2))"   # keep the newest two
  fi
  sleep 0.3
done
echo "rank $RANK saved"
SH
job writers "file://$root/origin-a/" "" "sh, $root/save.sh, \$(MARKER)" > "$root/writers.yaml"
run writers node-1
[[ $code == 0 ]] || fail "the saving run exits 0"
grep -q "checkpoints /ckpt: .*all at the origin" "$root/writers.out" || fail "the run drains"
tree="$(readlink "$root/run-writers/ckpt")"
[[ -f "$tree/checkpoint-3/.metadata" && ! -e "$tree/checkpoint-1" ]] || fail "the local tree"
same "$tree" "$root/origin-a" || fail "the origin holds every byte the workers wrote"
[[ -z $(find "$root/origin-a" -name '*.tmp') ]] || fail "no temporary file at the origin"

# 2. Another machine resumes from the same uri: every file restored before the workers start.
job resumed "file://$root/origin-a/" "" \
  "sh, -c, 'diff -r -x .granary-staging \$CHECKPOINTS $root/origin-a && echo rank \$RANK sees all', \$(MARKER)" \
  > "$root/resumed.yaml"
run resumed node-2
[[ $code == 0 ]] || fail "the resumed run exits 0"
grep -q "checkpoints /ckpt: 9 files (.*) restored from file://" \
  "$root/resumed.out" || fail "the restore says what it read"
grep -q "resumed-worker-1 | rank 1 sees all" "$root/resumed.out" || fail "rank 1 sees every file"

# 2b. kill -9 of granaryctl while it drains: the origin holds no part of a file and no marker
# before its files; the next run on the same machine finishes the drain.
cat > "$root/big.sh" <<'SH'
set -e
mkdir -p "$CHECKPOINTS/step-1"
head -c 8000000 /dev/urandom > "$CHECKPOINTS/step-1/__${RANK}_0.distcp"
sleep 0.5
[ "$RANK" = 0 ] && echo done > "$CHECKPOINTS/step-1/.metadata.tmp" &&
  mv "$CHECKPOINTS/step-1/.metadata.tmp" "$CHECKPOINTS/step-1/.metadata"
echo "rank $RANK saved"
SH
job killed "file://$root/origin-k/" "" "sh, $root/big.sh, \$(MARKER)" ", bandwidthLimit: 2Mi" \
  > "$root/killed.yaml"
"$granaryctl" run -f "$root/killed.yaml" --cache-dir "$root/cache-node-3" \
  --run-dir "$root/run-killed" > "$root/killed.out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -q "draining before the run ends" "$root/killed.out" && break
  sleep 0.1
done
sleep 2  # at 2 MiB/s, amid the upload of the first file
kill -KILL $pid
wait $pid || true
cat "$root/killed.out"
grep -q "draining before the run ends" "$root/killed.out" || fail "the run was draining"
tree="$(readlink "$root/run-killed/ckpt")"
while read -r file; do
  cmp -s "$root/origin-k/$file" "$tree/$file" || fail "$file at the origin is not what was written"
done < <(cd "$root/origin-k" && find . -path ./.granary-staging -prune -o -type f -print)
[[ ! -e "$root/origin-k/step-1/.metadata" ]] || fail "the marker went before its files"
echo "killed with $(ls -A "$root/origin-k/.granary-staging" 2>/dev/null | wc -l) upload(s) staged"
job finisher "file://$root/origin-k/" "" "true" > "$root/finisher.yaml"
run finisher node-3
[[ $code == 0 ]] || fail "the run after the kill exits 0"
grep -q "checkpoints /ckpt: .*all at the origin" "$root/finisher.out" || fail "the drain finishes"
same "$tree" "$root/origin-k" || fail "after the kill, the origin holds every byte written"
[[ -z $(ls -A "$root/origin-k/.granary-staging") ]] || fail "what the killed run staged is removed"

# 2c. A disk too small for the restore (the cache directory's checkpoints on a 10 MiB tmpfs, for
# 16 MB of checkpoints): a clear error before any worker starts, never a crash nor a partial tree
# handed to the workers.
mkdir -p "$root/cache-small/checkpoints"
mount -t tmpfs -o size=10m tmpfs "$root/cache-small/checkpoints"
job small "file://$root/origin-k/" "" "sh, -c, 'echo started', \$(MARKER)" > "$root/small.yaml"
set +e
"$granaryctl" run -f "$root/small.yaml" --cache-dir "$root/cache-small" \
  --run-dir "$root/run-small" > "$root/small.out" 2>&1
code=$?
set -e
cat "$root/small.out"
umount "$root/cache-small/checkpoints"
[[ $code == 1 ]] || fail "a full disk ends the run with 1, not $code"
grep -q "checkpoints /ckpt: restoring from file://.*No space left on device; free space under --cache-dir" \
  "$root/small.out" || fail "the full disk is named, with the fix"
! grep -q "started" "$root/small.out" || fail "no worker starts on a partial restore"

# 3. Bad input: a uri granary cannot write to.
job bad "http://example.invalid/ckpt/" "" "true" > "$root/bad.yaml"
run bad node-1
[[ $code == 1 ]] && grep -q "bad.yaml:12: spec.checkpoints.uri: expected an s3:// or file:// URI" \
  "$root/bad.out" || fail "a uri that cannot take checkpoints is named"

# 4. A real PyTorch job: the last rank is killed (SIGKILL) at step 25; the gang restarts from step 20's
# checkpoint with the losses of an uninterrupted run.
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "skipped the PyTorch job: /usr/bin/python3 cannot import torch (apt-get install python3-torch)"
  echo "granaryctl run with checkpoints: all other checks passed"
  exit 0
fi
script="$source_dir/examples/checkpoints/train_dcp.py"
env=", {name: STEPS, value: '30'}, {name: SAVE_EVERY, value: '10'}"
job straight "file://$root/origin-b/" "$env" "/usr/bin/python3, $script, \$(MARKER)" \
  > "$root/straight.yaml"
run straight node-1
[[ $code == 0 ]] || fail "the uninterrupted PyTorch run exits 0"
env+=", {name: FAIL_AT_STEP, value: '25'}, {name: FAIL_ONCE_FILE, value: $root/failed-once}"
job interrupted "file://$root/origin-c/" "$env" "/usr/bin/python3, $script, \$(MARKER)" \
  > "$root/interrupted.yaml"
run interrupted node-1
[[ $code == 0 ]] || fail "the interrupted PyTorch run recovers and exits 0"
grep -q "interrupted-worker-1 | rank 1 fails at step 25" "$root/interrupted.out" || fail "a failure"
grep -q "interrupted-worker-0 | rank 0 resumed from step-20" "$root/interrupted.out" ||
  fail "the restarted gang resumes from the newest checkpoint"
losses() { grep -o "$1-worker-0 | step 2[1-9] loss .*\|$1-worker-0 | step 30 loss .*" \
  "$root/$1.out" | sed 's/^[^|]*| //' | sort -u; }
[[ -n $(losses straight) ]] || fail "the uninterrupted run prints its losses"
diff <(losses straight) <(losses interrupted) || fail "the resumed run's losses differ"
same "$(readlink "$root/run-interrupted/ckpt")" "$root/origin-c" || fail "the job's checkpoints at the origin"
echo "granaryctl run with checkpoints: all checks passed"

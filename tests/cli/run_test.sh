#!/usr/bin/env bash
# granaryctl run end to end: two workers that check their environment and compare every byte of
# the mounted dataset with the origin; a failing worker restarting the gang up to backoffLimit;
# BeforeStart; the deadline; Ctrl-C leaving no mount and no process; GPUs from the fake NVML;
# the access-order hint; --refresh after the origin changed; clear errors for a bad file, a
# missing command and too few GPUs.
# Usage: run_test.sh GRANARYCTL FAKE_NVML_LIBRARY. Skips (exit 77) without root or /dev/fuse.
set -euo pipefail
granaryctl="$1"
fake_nvml="$2"
if [[ $(id -u) != 0 || ! -w /dev/fuse ]]; then
  echo "skipped: FUSE mounts need root and /dev/fuse"
  exit 77
fi
root=$(mktemp -d /tmp/granaryctl-run.XXXXXX)
marker="granary-run-test-$$"  # in the workers' command lines, to find any left behind
cleanup() {
  pkill -KILL -f "$marker" 2>/dev/null || true
  grep " $root/" /proc/self/mounts | cut -d' ' -f2 | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
mkdir -p "$root/origin/train/a" "$root/origin/val"
for i in $(seq 1 12); do head -c $((i * 65537)) /dev/urandom > "$root/origin/train/a/part-$i.bin"; done
head -c 1000 /dev/urandom > "$root/origin/val/x.bin"

fail() { echo "FAILED: $*"; exit 1; }

# job NAME WARM_POLICY EXTRA_SPEC SCRIPT: a Dataset and a TrainingJob whose two workers run
# SCRIPT (one line, no single quotes).
job() {
  cat <<YAML
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: sample, namespace: default}
spec:
  source: {uri: "file://$root/origin/"}
  cache: {chunkSize: 1Mi, bandwidthLimit: 2Mi}
---
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: $1, namespace: default}
spec:
  datasets: [{name: sample, mountPath: /data/sample}]
  workers: 2
  gpusPerWorker: 0
  warmPolicy: $2
$3
  template:
    spec:
      containers:
        - name: trainer
          image: unused-locally
          command: [sh, -c, '$4', $marker]
          env: [{name: DATA, value: /data/sample}]
YAML
}

# run NAME [granaryctl run flags...]: runs $root/NAME.yaml, keeping its output in $root/NAME.out
# and its exit code in $code.
run() {
  local name="$1"
  shift
  set +e
  "$granaryctl" run -f "$root/$name.yaml" --cache-dir "$root/cache-$name" \
    --run-dir "$root/run-$name" "$@" > "$root/$name.out" 2>&1
  code=$?
  set -e
  echo "--- $name: exit $code"
  cat "$root/$name.out"
}

# 1. Two workers see the torchrun environment and every byte of the origin.
check='[ "$WORLD_SIZE" = 2 ] && [ "$MASTER_ADDR" = 127.0.0.1 ] && [ -n "$MASTER_PORT" ] &&'
check+=' [ "$LOCAL_RANK" = "$RANK" ] && [ -z "$CUDA_VISIBLE_DEVICES" ] || { env; exit 9; };'
check+=' diff -r "$DATA" '"$root/origin"' && echo "rank $RANK read every byte"'
job good Parallel "" "$check" > "$root/good.yaml"
run good
[[ $code == 0 ]] || fail "a good run exits 0"
grep -q "good-worker-0 | rank 0 read every byte" "$root/good.out" || fail "rank 0's bytes"
grep -q "good-worker-1 | rank 1 read every byte" "$root/good.out" || fail "rank 1's bytes"
grep -q "default/good Succeeded" "$root/good.out" || fail "the summary says Succeeded"
grep -q "rank 0 read every byte" "$root/run-good/logs/good-worker-0.log" || fail "the worker's log"
! grep -q " $root/run-good/" /proc/self/mounts || fail "the mount is gone after the run"

# 1b. --refresh: after the origin changed, a run reads what it holds now, and so does a later run
# without --refresh (tests/cli/mount_refresh_test.sh shows that it keeps the version made).
head -c 2000 /dev/urandom > "$root/origin/val/x.bin"
head -c 3000 /dev/urandom > "$root/origin/val/y.bin"
rm "$root/origin/train/a/part-12.bin"
run good --refresh
[[ $code == 0 ]] || fail "a refreshed run exits 0"
grep -q "default/sample refreshed: version 2, 1 added, 1 changed, 1 removed, 11 unchanged" \
  "$root/good.out" || fail "the refresh says what it found"
grep -q "good-worker-1 | rank 1 read every byte" "$root/good.out" || fail "the refreshed bytes"
run good
[[ $code == 0 ]] || fail "a run after the refresh exits 0"
grep -q "good-worker-0 | rank 0 read every byte" "$root/good.out" || fail "the newest version"

# 2. A failing worker restarts the gang backoffLimit times, then the run fails with its code.
job failing Parallel "  runPolicy: {backoffLimit: 2, restartPolicy: OnFailure}" \
  'echo "attempt"; [ "$RANK" = 1 ] && exit 3; exec sleep 60' > "$root/failing.yaml"
run failing
[[ $code == 3 ]] || fail "the failing worker's exit code, 3"
[[ $(grep -c "failing-worker-1 | attempt" "$root/failing.out") == 3 ]] || fail "three attempts"
grep -q "restarting the gang (restart 2 of 2)" "$root/failing.out" || fail "restarts are told"
grep -q "Failed: failing-worker-1 exited 3" "$root/failing.out" || fail "the failure is named"
! pgrep -f "$marker" > /dev/null || fail "no worker outlives the run"

# 3. BeforeStart: the workers start once the dataset is Ready, so they read only from the cache.
job before BeforeStart "" "$check" > "$root/before.yaml"
run before
[[ $code == 0 ]] || fail "BeforeStart succeeds"
grep -Eq "^  read ([0-9.]+[KMG]i?): \1 from the cache, 0 from the origin" "$root/before.out" ||
  fail "BeforeStart workers read nothing from the origin"

# 4. activeDeadlineSeconds stops the run with 124.
job late Parallel "  runPolicy: {activeDeadlineSeconds: 2}" 'exec sleep 60' > "$root/late.yaml"
run late
[[ $code == 124 ]] || fail "past the deadline: 124"
grep -q "activeDeadlineSeconds (2) passed" "$root/late.out" || fail "the deadline is named"

# 5. Ctrl-C mid-run stops the workers (and what they started) and unmounts.
job stopped Parallel "" 'sh -c "sleep 300; true" '"$marker"' & echo started; wait' \
  > "$root/stopped.yaml"
"$granaryctl" run -f "$root/stopped.yaml" --cache-dir "$root/cache-stopped" \
  --run-dir "$root/run-stopped" > "$root/stopped.out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  [[ $(grep -c "| started" "$root/stopped.out") == 2 ]] && break
  sleep 0.1
done
[[ $(pgrep -cf "$marker") -ge 4 ]] || fail "two workers and their sleeps run"
kill -INT $pid
set +e
wait $pid
code=$?
set -e
cat "$root/stopped.out"
[[ $code == 130 ]] || fail "Ctrl-C: 130, not $code"
! pgrep -f "$marker" > /dev/null || fail "no worker or child outlives Ctrl-C"
! grep -q " $root/run-stopped/" /proc/self/mounts || fail "no mount outlives Ctrl-C"

# 6. GPUs: two from the fake NVML, one per worker, and their utilization in the summary.
printf 'gpu GPU-aaaa H100 util=75\ngpu GPU-bbbb H100 util=75\n' > "$root/gpus.txt"
job gpus Parallel "" 'echo "gpus [$CUDA_VISIBLE_DEVICES]"; sleep 2.5' |
  sed 's/gpusPerWorker: 0/gpusPerWorker: 1/' > "$root/gpus.yaml"
GRANARY_FAKE_NVML="$root/gpus.txt" run gpus --nvml-library "$fake_nvml"
[[ $code == 0 ]] || fail "the GPU run succeeds"
grep -q "gpus-worker-1 | gpus \[1\]" "$root/gpus.out" || fail "worker 1 sees GPU 1"
grep -q "gpus-worker-0: exit 0, .*GPU utilization 75%" "$root/gpus.out" || fail "utilization"

# 6b. The job's access-order hint reaches the engine: it reads the file of the dataset, warms by
# it, and names the path it lists that the dataset lacks.
printf 'val/x.bin\nno-such-file.bin\ntrain/a/part-1.bin\n' > "$root/origin/order.txt"
job hint BeforeStart "" 'echo started' |
  sed 's|mountPath: /data/sample}|mountPath: /data/sample, accessOrderFile: order.txt}|' \
  > "$root/hint.yaml"
run hint
[[ $code == 0 ]] || fail "the hinted run succeeds"
grep -q "access order are not files of the dataset and were skipped (no-such-file.bin)" \
  "$root/hint.out" || fail "the hint file was read and its unknown path named"
rm "$root/origin/order.txt"

# 7. Clear errors.
run missing-file
[[ $code == 1 ]] && grep -q "missing-file.yaml" "$root/missing-file.out" || fail "a missing file is named"
job nocommand Parallel "" x | sed "s|command: \[sh, -c, 'x', $marker\]|command: [no-such-program-$marker]|" \
  > "$root/nocommand.yaml"
run nocommand
[[ $code == 1 ]] && grep -q 'command\[0\]: "no-such-program' "$root/nocommand.out" ||
  fail "a missing program is named"
sed 's/gpusPerWorker: 0/gpusPerWorker: 1/' "$root/good.yaml" > "$root/nogpu.yaml"
run nogpu --nvml-library /nonexistent/libnvidia-ml.so.1
[[ $code == 1 ]] && grep -q "need 2 GPUs; this machine has 0 (no NVIDIA driver" "$root/nogpu.out" ||
  fail "too few GPUs are named"
echo "granaryctl run: all checks passed"

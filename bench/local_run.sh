#!/usr/bin/env bash
# How busy a training job keeps its accelerator when its dataset sits on a slow origin, fed
# three ways, side by side in one run:
#   direct           the trainer reads the origin itself;
#   copy-then-train  `cp -r` of the dataset to local disk, then the trainer reads the copy;
#   granary          `granaryctl run` (warmPolicy Parallel): the cache warms from the origin
#                    while the trainer already reads through granary's read-only mount.
# The origin is bench/throttled_mount.cc: the dataset's files mirrored read-only, every read
# (never the page cache) paid at a tenth of the trainer's demand (one worker: sample size ÷
# compute time). Each setup starts from nothing: no copy, an empty cache. Per epoch it prints
# accelerator utilization and time to first batch, then checks granary against its goals.
# Needs root and /dev/fuse.
#
#   bench/local_run.sh [BUILD_DIR]      (default: build)
#
# Knobs (environment): FILES (1024) samples of FILE_KIB (256) KiB, COMPUTE_MS (2.5) per sample,
# RATE_DIVISOR (10: origin = demand ÷ 10), EPOCHS (3), BATCH (4), READERS (4), PREFETCH (2),
# SEED (1), WORK (/var/tmp/granary-local-bench: the dataset, kept between runs, and results).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
files=${FILES:-1024} file_kib=${FILE_KIB:-256} compute_ms=${COMPUTE_MS:-2.5}
rate_divisor=${RATE_DIVISOR:-10} epochs=${EPOCHS:-3} batch=${BATCH:-4} readers=${READERS:-4}
prefetch=${PREFETCH:-2} seed=${SEED:-1} work=${WORK:-/var/tmp/granary-local-bench}

[[ $(id -u) == 0 && -c /dev/fuse ]] || { echo "local_run.sh: needs root and /dev/fuse" >&2; exit 2; }
grep -q '^GRANARY_BUILD_BENCH:BOOL=ON' "$build/CMakeCache.txt" || {
  echo "local_run.sh: $build was configured without benchmarks; cmake -DGRANARY_BUILD_BENCH=ON" >&2
  exit 2
}
ninja -C "$build" granaryctl granary-trainer throttled-mount >/dev/null
granaryctl=$build/cli/granaryctl
trainer=$build/examples/trainer/granary-trainer

file_bytes=$((file_kib * 1024))
demand=$(python3 -c "print(round($file_bytes / ($compute_ms / 1000)))")  # bytes/s, one worker
rate=$((demand / rate_divisor))
origin=$work/origin slow=$work/origin-slow copy=$work/copy cache=$work/cache run=$work/run
results=$work/results-$(date +%Y%m%d-%H%M%S)
mkdir -p "$slow" "$results/bin"

# Clean-up, on success, failure or Ctrl-C: stop what this script started, then unmount.
child='' throttle=''
cleanup() {
  set +e
  # TERM: a script's background children ignore SIGINT.
  [[ -n $child ]] && kill -TERM "$child" 2>/dev/null && wait "$child" 2>/dev/null
  [[ -n $throttle ]] && kill -TERM "$throttle" 2>/dev/null && wait "$throttle" 2>/dev/null
  for m in "$run/data/bench" "$slow"; do mountpoint -q "$m" && umount -l "$m"; done
  rm -rf "$copy"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Runs "$@" as a child the trap can stop; returns its exit code.
supervise() {
  "$@" &
  child=$!
  local code=0
  wait "$child" || code=$?
  child=''
  return "$code"
}

# The dataset, made once: FILES random files, in the page cache so that only the throttle
# limits the origin.
if [[ $(cat "$origin.done" 2>/dev/null) != "$files x $file_kib KiB" ]]; then
  rm -rf "$origin" && mkdir -p "$origin/train"
  for i in $(seq -w 0 $((files - 1))); do
    head -c "$file_bytes" /dev/urandom >"$origin/train/sample-$i.bin"
  done
  echo "$files x $file_kib KiB" >"$origin.done"
fi
cat "$origin"/train/* >/dev/null

mountpoint -q "$slow" && umount -l "$slow"
"$build/bench/throttled-mount" "$origin" "$slow" --rate "$rate" &
throttle=$!
for _ in $(seq 100); do mountpoint -q "$slow" && break; sleep 0.05; done
mountpoint -q "$slow" || { echo "local_run.sh: throttled-mount did not mount $slow" >&2; exit 1; }

# granary-trainer on PATH for granaryctl, writing each line of its standard error to
# $STAMPS with the time it came: "computing on" is printed as epoch 1 starts.
cat >"$results/bin/granary-trainer" <<EOF
#!/usr/bin/env bash
exec "$trainer" "\$@" 2> >(while IFS= read -r l; do echo "\$EPOCHREALTIME \$l" >>"\$STAMPS"; echo "\$l" >&2; done)
EOF
chmod +x "$results/bin/granary-trainer"
export PATH=$results/bin:$PATH
trainer_flags=(--epochs="$epochs" --batch-size="$batch" --readers="$readers"
               --prefetch="$prefetch" --compute-ms="$compute_ms" --seed="$seed")
meta=$results/meta
{ echo "rate $rate"; echo "demand $demand"; } >"$meta"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)" >"$results/load"

echo "== origin $((rate / 1024)) KiB/s, demand $((demand / 1024)) KiB/s, $files x $file_kib KiB," \
  "$epochs epochs; results in $results"

echo "== direct: the trainer reads the origin"
sync
echo "t0 direct $EPOCHREALTIME" >>"$meta"
STAMPS=$results/direct.stamps supervise granary-trainer --data="$slow" "${trainer_flags[@]}" \
  --report="$results/direct.jsonl"
echo "end direct $EPOCHREALTIME" >>"$meta"

echo "== copy-then-train: cp -r, then the trainer reads the copy"
rm -rf "$copy"
sync
echo "t0 copy $EPOCHREALTIME" >>"$meta"
supervise cp -r "$slow" "$copy"
echo "copied copy $EPOCHREALTIME" >>"$meta"
STAMPS=$results/copy.stamps supervise granary-trainer --data="$copy" "${trainer_flags[@]}" \
  --report="$results/copy.jsonl"
echo "end copy $EPOCHREALTIME" >>"$meta"
rm -rf "$copy"

echo "== granary: granaryctl run, warmPolicy Parallel"
rm -rf "$cache" "$run"
cat >"$results/job.yaml" <<EOF
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: bench, namespace: default}
spec:
  source: {uri: "file://$slow/"}
---
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: bench, namespace: default}
spec:
  datasets: [{name: bench, mountPath: /data/bench}]
  workers: 1
  gpusPerWorker: 0
  warmPolicy: Parallel
  runPolicy: {backoffLimit: 0}
  template:
    spec:
      containers:
        - name: trainer
          image: granary-trainer
          command: [granary-trainer, --data=/data/bench, $(IFS=,; echo "${trainer_flags[*]}"),
                    --report=$results/granary.jsonl]
EOF
sync
echo "t0 granary $EPOCHREALTIME" >>"$meta"
STAMPS=$results/granary.stamps "$granaryctl" run -f "$results/job.yaml" --cache-dir "$cache" \
  --run-dir "$run" --plain >"$results/granary.log" 2>&1 &
child=$!
tail -n +1 -f -s 0.1 --pid="$child" "$results/granary.log" &  # shows it as it comes
code=0
wait "$child" || code=$?
echo "end granary $EPOCHREALTIME" >>"$meta"  # before tail notices the exit
child=''
wait $!
((code == 0)) || { echo "local_run.sh: granaryctl run exited $code" >&2; exit "$code"; }
rm -rf "$cache"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$results/load"

python3 - "$results" <<'PY'
import json, re, sys
results = sys.argv[1]
meta = {}
for line in open(f"{results}/meta"):
    words = line.split()
    meta[tuple(words[:-1])] = float(words[-1])
rate, demand = meta[("rate",)], meta[("demand",)]
ratio = rate / demand
copy_s = meta[("copied", "copy")] - meta[("t0", "copy")]

def epochs(setup):
    return [json.loads(l) for l in open(f"{results}/{setup}.jsonl") if l.strip()]

def started(setup):  # when epoch 1 began: the stamped "computing on" line
    for line in open(f"{results}/{setup}.stamps"):
        if "computing on" in line:
            return float(line.split()[0])
    raise SystemExit(f"{setup}: the trainer never started")

rows = {}
print(f"\norigin {rate / 2**20:.2f} MiB/s, demand {demand / 2**20:.1f} MiB/s (one worker), "
      f"origin / demand = {ratio:.3f}; copy took {copy_s:.1f} s")
print(f"{'setup':<16} {'epoch':>5} {'seconds':>8} {'first-batch-s':>13} {'utilization':>11}"
      f" {'from-launch-s':>13}")
for setup in ("direct", "copy", "granary"):
    launch = started(setup) - meta[("t0", setup)]
    for e in epochs(setup):
        seconds, first = e["seconds"], e["firstBatchSeconds"]
        if setup == "copy" and e["epoch"] == 1:  # the copy is part of the first epoch
            seconds, first = seconds + copy_s, first + copy_s
            launch -= copy_s  # already counted in `first`
        util = e["computeSeconds"] / seconds
        rows[(setup, e["epoch"])] = util, first
        from_launch = f"{launch + first:13.3f}" if e["epoch"] == 1 else f"{'':13}"
        name = "copy-then-train" if setup == "copy" else setup
        print(f"{name:<16} {e['epoch']:>5} {seconds:8.2f} {first:13.3f} {util:11.3f} {from_launch}")
for setup in ("direct", "copy", "granary"):
    print(f"{setup}: {meta[('end', setup)] - meta[('t0', setup)]:.1f} s from start to end")
summary = [l.strip() for l in open(f"{results}/granary.log") if re.search(r"^\s*read .* from the", l)]
print(open(f"{results}/load").read().strip().replace("\n", "; "))
print("granaryctl summary:", summary[-1] if summary else "(no read line)")

def check(ok, text):
    print(f"{'PASS' if ok else 'MISS'}: {text}")
later = [(ep, u) for (s, ep), (u, _) in rows.items() if s == "granary" and ep >= 2]
check(later and all(u >= 0.9 for _, u in later),
      "granary epochs >= 2 at utilization >= 0.9: " + ", ".join(f"{u:.3f}" for _, u in later))
u1, first1 = rows[("granary", 1)]
check(u1 >= 0.9 * ratio, f"granary epoch 1 utilization {u1:.3f} >= 0.9 x {ratio:.3f} = {0.9 * ratio:.3f}")
check(first1 < 1.0, f"granary first batch {first1:.3f} s < 1 s")
PY

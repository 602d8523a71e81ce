#!/usr/bin/env bash
# Smoke test of granary-trainer (registered with ctest as trainer.smoke):
#   smoke_test.sh PATH/TO/granary-trainer
# Two ranks read ~40 random files in nested directories for 2 epochs; together they must read
# every file exactly once per epoch (samples and bytes add up), report utilization in (0, 1],
# and a missing or empty --data must fail with exit code 2 and an error naming --data.
set -euo pipefail

trainer=${1:?usage: smoke_test.sh PATH/TO/granary-trainer}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The dataset: 40 files of 0 to 64 KiB, 1 to 3 directories deep.
python3 - "$work/data" <<'PY'
import os, random, sys
root = sys.argv[1]
rng = random.Random(7)
for i in range(40):
    depth = rng.randint(1, 3)
    directory = os.path.join(root, *(f"d{rng.randint(0, 2)}" for _ in range(depth)))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"sample-{i:03}.bin"), "wb") as f:
        f.write(os.urandom(rng.randint(0, 64 * 1024)))
PY
file_count=$(find "$work/data" -type f | wc -l)
total_bytes=$(find "$work/data" -type f -printf '%s\n' | awk '{s += $1} END {print s}')

for rank in 0 1; do
  RANK=$rank WORLD_SIZE=2 "$trainer" --data "$work/data" --batch-size 3 --readers 2 \
    --compute-ms 0.5 --seed 11 --report "$work/report.jsonl" >"$work/stdout.$rank"
  cat "$work/stdout.$rank"
  lines=$(grep -cE '^epoch [12]/2: [0-9]+ samples, [0-9.]+ MiB in [0-9.]+ s, [0-9.]+ samples/s, first batch [0-9.]+ s, data wait [0-9.]+ s, accelerator utilization [0-9.]+$' \
    "$work/stdout.$rank" || true)
  if [[ $lines -ne 2 ]]; then
    echo "FAIL: rank $rank printed $lines well-formed epoch lines, want 2" >&2
    exit 1
  fi
done

python3 - "$work/report.jsonl" "$file_count" "$total_bytes" <<'PY'
import collections, json, sys
path, file_count, total_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
records = [json.loads(line) for line in open(path)]
failures = []
keys = {"rank", "worldSize", "epoch", "samples", "bytes", "seconds", "samplesPerSecond",
        "firstBatchSeconds", "dataWaitSeconds", "computeSeconds", "acceleratorUtilization",
        "device"}
for r in records:
    if set(r) != keys:
        failures.append(f"record keys {sorted(r)} differ from {sorted(keys)}")
    if not 0 < r["acceleratorUtilization"] <= 1:
        failures.append(f"rank {r['rank']} epoch {r['epoch']}: utilization "
                        f"{r['acceleratorUtilization']} is not in (0, 1]")
    if r["worldSize"] != 2 or r["device"] not in ("cpu", "gpu"):
        failures.append(f"bad record {r}")
per_rank = collections.Counter(r["rank"] for r in records)
if per_rank != {0: 2, 1: 2}:
    failures.append(f"epochs reported per rank: {dict(per_rank)}, want 2 for each of ranks 0 and 1")
epochs = sorted({r["epoch"] for r in records})
if epochs != [1, 2]:
    failures.append(f"epochs reported: {epochs}, want [1, 2]")
for epoch in epochs:
    samples = sum(r["samples"] for r in records if r["epoch"] == epoch)
    read = sum(r["bytes"] for r in records if r["epoch"] == epoch)
    if samples != file_count or read != total_bytes:
        failures.append(f"epoch {epoch}: ranks read {samples} samples and {read} bytes, "
                        f"want {file_count} files and {total_bytes} bytes")
for failure in failures:
    print("FAIL:", failure, file=sys.stderr)
sys.exit(1 if failures else 0)
PY

# expect_usage_error DESCRIPTION ARGS...: exit code 2 and an error naming --data.
expect_usage_error() {
  local description=$1
  shift
  local code=0
  "$trainer" "$@" 2>"$work/stderr" >/dev/null || code=$?
  if [[ $code -ne 2 ]] || ! grep -q -- '--data' "$work/stderr"; then
    echo "FAIL: $description: exit code $code (want 2), stderr: $(cat "$work/stderr")" >&2
    exit 1
  fi
  echo "ok: $description: $(cat "$work/stderr")"
}
mkdir "$work/empty"
expect_usage_error "no --data" --epochs 1
expect_usage_error "missing --data directory" --data "$work/missing"
expect_usage_error "empty --data directory" --data "$work/empty"

echo "PASS: $file_count files, $total_bytes bytes, read once per epoch by 2 ranks"

#!/usr/bin/env bash
# granaryctl run with spec.elastic, end to end with a real torchrun (Debian's python3-torch):
# three workers, minWorkers 2, running examples/elastic/train_elastic.py. One worker killed
# (kill -9 of its process group) mid-epoch: the other two go on without being restarted, meet
# again at the rendezvous (hosted by a process of its own, told by granaryctl that the lost
# agent is gone, so that it lets it go at once), the lost one is started again and joins them,
# and every sample of each epoch is trained exactly once. Two killed at once (below
# minWorkers): the gang restarts, as a fixed gang does. Two wanted with maxWorkers 3 and no GPUs
# asked for: the run grows to three, as a cluster grows where capacity allows.
# Usage: elastic_run_test.sh GRANARYCTL SOURCE_DIR. Skips (exit 77) where /usr/bin/python3
# cannot import torch (scripts/setup.sh installs python3-torch).
set -euo pipefail
granaryctl="$1"
source_dir="$2"
if ! /usr/bin/python3 -c "import torch" 2>/dev/null || [[ ! -x /usr/bin/torchrun ]]; then
  echo "skipped: /usr/bin/python3 cannot import torch or /usr/bin/torchrun is missing" \
       "(apt-get install python3-torch)"
  exit 77
fi
root=$(mktemp -d /tmp/granaryctl-elastic.XXXXXX)
cleanup() {
  [[ -n "${run_pid:-}" ]] && kill -KILL "$run_pid" 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
fail() { echo "FAILED: $*"; tail -n 40 "$root/$name.out" 2>/dev/null; exit 1; }

# job NAME [ELASTIC]: a three-worker elastic TrainingJob with its own state directory; ELASTIC
# replaces its workers and elastic lines.
job() {
  cat <<YAML
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: $1, namespace: default}
spec:
${2:-"  workers: 3
  elastic: {minWorkers: 2}"}
  gpusPerWorker: 0
  runPolicy: {backoffLimit: 3}
  template:
    spec:
      containers:
        - name: trainer
          image: unused-locally
          command: [torchrun, $source_dir/examples/elastic/train_elastic.py]
          env:
            - {name: PATH, value: /usr/bin:/bin}
            - {name: STATE_DIR, value: $root/$1-state}
            - {name: SAMPLES, value: "1536"}
            - {name: STEP_SECONDS, value: "0.15"}
            - {name: PET_REDIRECTS, value: "1:1"}
            - {name: PET_TEE, value: "1:1"}
YAML
}

# agents: the pids of granaryctl's torchrun children (each a worker's process group).
agents() { pgrep -P "$run_pid" -f torchrun || true; }

# run NAME KILLS: starts the job, waits for step 12, SIGKILLs KILLS workers' process groups at
# once, and waits for granaryctl to end; its output is in $root/NAME.out, its exit code in $code.
run() {
  name=$1
  job "$name" > "$root/$name.yaml"
  "$granaryctl" run -f "$root/$name.yaml" --plain --run-dir "$root/$name-run" \
    --cache-dir "$root/$name-cache" > "$root/$name.out" 2>&1 &
  run_pid=$!
  for _ in $(seq 600); do
    grep -q "| step 12 " "$root/$name.out" && break
    kill -0 "$run_pid" 2>/dev/null || fail "$name: granaryctl ended before step 12"
    sleep 0.2
  done
  grep -q "| step 12 " "$root/$name.out" || fail "$name: no step 12 within 120 s"
  mapfile -t pids < <(agents)
  [[ ${#pids[@]} == 3 ]] || fail "$name: expected 3 torchrun agents, found ${#pids[@]}"
  killed=("${pids[@]:1:$2}")
  survivors=("${pids[@]:$((1 + $2))}" "${pids[0]}")
  lines_before=$(wc -l < "$root/$name.out")
  # Killed at once as granaryctl sees it: it is held until every killed agent is dead, so that
  # however busy the machine, it never reaps one before the other dies.
  kill -STOP "$run_pid"
  for pid in "${killed[@]}"; do kill -KILL -- "-$pid"; done
  killed_at=$(date +%s.%N)
  for pid in "${killed[@]}"; do
    for _ in $(seq 200); do [[ $(ps -o stat= -p "$pid" || true) == Z* ]] && break; sleep 0.05; done
  done
  kill -CONT "$run_pid"
  # The first step the workers complete after they start again (the step in flight at the kill
  # may still be printed by rank 0 before they notice), from their own lines (the live view's
  # repeat each worker's last line).
  for _ in $(seq 900); do
    resumed=$(tail -n +"$lines_before" "$root/$name.out" | grep -v '^\[' |
      awk -v k="$killed_at" '/starts at epoch/ { started = 1 }
        started && !found && /\| step / && $NF > k { print $NF; found = 1 }' || true)
    [[ -n "$resumed" ]] && break
    kill -0 "$run_pid" 2>/dev/null || break
    sleep 0.2
  done
  [[ -n "$resumed" ]] || fail "$name: no step completed after the workers started again"
  alive=0
  for pid in "${survivors[@]}"; do kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)); done
  code=0
  wait "$run_pid" || code=$?
  run_pid=
}

# One lost: the others are never restarted, the lost one is started again, nothing trained twice.
run one 1
[[ $code == 0 ]] || fail "one: granaryctl exited $code"
grep -q "one-worker-[0-9] lost (killed by SIGKILL); the other 2 go on" "$root/one.out" ||
  fail "one: the loss was not reported as one the others go on from"
grep -q "restarting the gang" "$root/one.out" && fail "one: the gang restarted"
[[ $alive == 2 ]] || fail "one: $((2 - alive)) of the surviving workers' processes did not survive"
[[ $(grep -c "one-worker-[0-9] lost" "$root/one.out") == 1 ]] || fail "one: more than one lost"
grep -q "membership: 2 changes" "$root/one.out" || fail "one: the summary does not count 2 changes"
grep -q "rendezvous | rendezvous: let go at once" "$root/one.out" ||
  fail "one: the store, told by granaryctl, did not let the lost agent go at once"
grep -q "Lost one-worker-[0-9] (killed by SIGKILL), 2 running" "$root/one.out" ||
  fail "one: the summary does not list the loss"
for epoch in 0 1; do
  grep -q "epoch $epoch: 1536 of 1536 samples trained, 0 more than once" "$root/one.out" ||
    fail "one: epoch $epoch was not trained exactly once"
done
echo "one lost: training resumed $(echo "$resumed - $killed_at" | bc) s after the kill"

# Two lost of three, below minWorkers 2: a gang restart, and the job still finishes.
run two 2
[[ $code == 0 ]] || fail "two: granaryctl exited $code"
grep -q "restarting the gang (restart 1 of 3)" "$root/two.out" ||
  fail "two: below minWorkers did not restart the gang"
echo "two lost: training resumed $(echo "$resumed - $killed_at" | bc) s after the kill"
for epoch in 0 1; do
  grep -q "epoch $epoch: 1536 of 1536 samples trained, 0 more than once" "$root/two.out" ||
    fail "two: epoch $epoch was not trained exactly once"
done
# Two wanted, maxWorkers 3, no GPUs asked for: three run, all in one group, and finish.
name=grow
job grow "  workers: 2
  elastic: {minWorkers: 2, maxWorkers: 3}" > "$root/grow.yaml"
code=0
"$granaryctl" run -f "$root/grow.yaml" --plain --run-dir "$root/grow-run" \
  --cache-dir "$root/grow-cache" > "$root/grow.out" 2>&1 || code=$?
[[ $code == 0 ]] || fail "grow: granaryctl exited $code"
grep -q "growing towards maxWorkers 3: 3 workers run, 2 wanted" "$root/grow.out" ||
  fail "grow: the run did not grow to maxWorkers"
grep -q "Joined grow-worker-2 (growing towards maxWorkers), 3 running" "$root/grow.out" ||
  fail "grow: the summary does not list the worker that joined"
grep -q '^[^[].*| step .* world 3 ' "$root/grow.out" ||
  fail "grow: no step trained by a group of three"
for epoch in 0 1; do
  grep -q "epoch $epoch: 1536 of 1536 samples trained, 0 more than once" "$root/grow.out" ||
    fail "grow: epoch $epoch was not trained exactly once"
done
echo "grown to 3 of maxWorkers 3 (2 wanted)"
echo "PASSED"

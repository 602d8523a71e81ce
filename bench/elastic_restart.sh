#!/usr/bin/env bash
# The cost of losing a worker, elastic against a gang restart, in the same run: a real PyTorch
# DDP job (examples/elastic/train_elastic.py under Debian's torchrun) with 3 workers runs under
# granaryctl run; at step 12 one worker's process group gets SIGKILL. Printed for each round and
# each mode: seconds from the kill to the next training step the workers complete after they
# start again, and whether every sample of each epoch was trained exactly once.
#   elastic: spec.elastic {minWorkers: 2}: the other two go on, the lost one joins them again;
#   gang:    no spec.elastic: every worker stops and the gang starts again (a gang restart).
# Usage: bench/elastic_restart.sh GRANARYCTL [ROUNDS]   (needs python3-torch; not part of CI)
set -euo pipefail
granaryctl=$(realpath "$1")
rounds=${2:-3}
source_dir=$(cd "$(dirname "$0")/.." && pwd)
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "needs python3-torch"; exit 2; }
root=$(mktemp -d /tmp/granary-elastic-bench.XXXXXX)
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$root"' EXIT

job() {  # NAME ELASTIC_LINE
  cat <<YAML
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: $1, namespace: default}
spec:
  workers: 3
$2
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

measure() {  # NAME ELASTIC_LINE -> prints "seconds exactly-once"
  local name=$1 out="$root/$1.out"
  job "$name" "$2" > "$root/$name.yaml"
  "$granaryctl" run -f "$root/$name.yaml" --plain --run-dir "$root/$name-run" \
    --cache-dir "$root/$name-cache" > "$out" 2>&1 &
  local pid=$!
  until grep -q "| step 12 " "$out"; do sleep 0.1; done
  local before victim killed_at resumed
  before=$(wc -l < "$out")
  victim=$(pgrep -P "$pid" -f torchrun | sed -n 2p)
  kill -KILL -- "-$victim"
  killed_at=$(date +%s.%N)
  wait "$pid" || true
  # The workers' own lines only (the live view's, "[hh:mm:ss] ...", repeat a worker's last line),
  # and only a step stamped after the kill: the one in flight may end just after it.
  resumed=$(tail -n +"$before" "$out" | grep -v '^\[' |
    awk -v k="$killed_at" '/starts at epoch/ { s = 1 } s && !f && /\| step / && $NF > k { print $NF; f = 1 }' ||
    true)
  local once
  once=$(grep -cE "^[^[].*-worker-[0-9]+ \| epoch [01]: 1536 of 1536 samples trained, 0 more than once" "$out" || true)
  printf "%.1f %s\n" "$(echo "$resumed - $killed_at" | bc)" "$([[ $once == 2 ]] && echo yes || echo NO)"
}

printf "%-6s %-28s %-28s %s\n" round "elastic: s to next step" "gang restart: s to next step" ratio
for round in $(seq "$rounds"); do
  read -r e eo < <(measure "elastic-$round" "  elastic: {minWorkers: 2}")
  read -r g go < <(measure "gang-$round" "")
  printf "%-6s %-28s %-28s %.2f\n" "$round" "$e (exactly once: $eo)" "$g (exactly once: $go)" \
    "$(echo "$e / $g" | bc -l)"
done

#!/usr/bin/env bash
# A cache node's /metrics, idle and while a dataset warms, passes `promtool check metrics`, and
# an idle node already draws: its build info, process series and cache directories are there
# from the start. Usage: metrics_promtool_test.sh GRANARY_CACHE_NODE. Skips (77) without promtool.
set -euo pipefail
node="$1"
command -v promtool > /dev/null || { echo "skipped: promtool is not installed (Debian's prometheus)"; exit 77; }
root=$(mktemp -d /tmp/granary-promtool.XXXXXX)
trap 'kill %1 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$root"' EXIT
port=0
node_args=()

# start_node ARGS...: the node in the background, its /metrics on a port drawn at random.
start_node() {
  node_args=("$@")
  port=$((20000 + RANDOM % 20000))
  "$node" --state-dir "$root/state" --listen 127.0.0.1:0 --transfer-listen 127.0.0.1:0 --metrics-address "127.0.0.1:$port" \
    --log-level warn "${node_args[@]}" > "$root/log.txt" 2>&1 &
}

# scrape NAME: this node's /metrics into $root/NAME.txt, once it answers with its own cache
# directory (the metrics endpoint is up before the cache's stores are open). A port another
# process took between the draw and the bind makes the node exit at once: it starts again on
# another.
scrape() {
  for _ in $(seq 1 300); do
    if grep -q "cannot serve metrics" "$root/log.txt"; then
      wait %1 || true
      start_node "${node_args[@]}"
    fi
    curl -sf "http://127.0.0.1:$port/metrics" -o "$root/$1.txt" &&
      grep -qF "granary_cache_disk_quota_bytes{directory=\"$root/state/cache\"}" "$root/$1.txt" &&
      return 0
    sleep 0.1
  done
  echo "FAILED: no /metrics on port $port"; cat "$root/log.txt"; exit 1
}
check() {
  promtool check metrics < "$root/$1.txt" || { echo "FAILED: promtool on $1"; cat "$root/$1.txt"; exit 1; }
  for series in 'granary_build_info{component="granary-cache-node"' 'process_start_time_seconds ' \
    'process_resident_memory_bytes ' "granary_cache_disk_quota_bytes{directory=\"$root/state/cache\"} 10737418240"; do
    grep -qF "$series" "$root/$1.txt" || { echo "FAILED: $1 lacks $series"; cat "$root/$1.txt"; exit 1; }
  done
}

start_node
scrape idle
check idle
kill %1; wait %1 || true

mkdir -p "$root/origin"
for i in $(seq 1 8); do head -c 1048576 /dev/urandom > "$root/origin/f$i"; done
cat > "$root/dataset.yaml" <<YAML
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: d, namespace: default}
spec:
  source: {uri: "file://$root/origin/"}
  cache: {chunkSize: 1Mi}
YAML
start_node --dataset "$root/dataset.yaml"
for _ in $(seq 1 100); do grep -q "Ready" "$root/log.txt" && break; sleep 0.1; done
scrape warm
check warm
grep -q 'granary_cache_used_bytes{dataset="default/d"} 8388608' "$root/warm.txt" ||
  { echo "FAILED: the dataset's used bytes"; cat "$root/warm.txt"; exit 1; }
echo "promtool: the cache node's /metrics pass, idle and warm"

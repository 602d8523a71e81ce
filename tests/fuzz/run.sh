#!/usr/bin/env bash
# Runs the libFuzzer targets of a GRANARY_FUZZ build over their seed corpora:
#   tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]     (default: every target)
# Each target runs SECONDS (and at most GRANARY_FUZZ_RUNS inputs, default unbounded; inputs of at
# most GRANARY_FUZZ_MAX_LEN bytes, default libFuzzer's; GRANARY_FUZZ_FLAGS adds libFuzzer flags)
# from tests/fuzz/corpus/<target>/; what it finds new goes to a scratch corpus, so the checked-in
# seeds stay as they are. A crash, leak, timeout or broken invariant fails the run; the input is
# kept as BUILD_DIR/fuzz-artifacts/<target>/crash-... and its log tail printed. One line per
# target and a summary line report executions and coverage.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$1
seconds=$2
shift 2
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(manifest watch_decoder extender s3_listing http_index csi_publication transfer_frame)
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=()
total_execs=0
start=$(date +%s)
for target in "${targets[@]}"; do
  binary="$build/tests/fuzz/${target}_fuzz"
  artifacts="$build/fuzz-artifacts/$target"
  mkdir -p "$scratch/$target" "$artifacts"
  log="$scratch/$target.log"
  # -timeout: one input may take 10 s (ASan, cold caches); -rss_limit_mb: a parser must not need
  # 2 GiB for an input of at most max_len bytes.
  # shellcheck disable=SC2086  # GRANARY_FUZZ_FLAGS: several flags, after the defaults it overrides
  if "$binary" -max_total_time="$seconds" ${GRANARY_FUZZ_RUNS:+-runs="$GRANARY_FUZZ_RUNS"} \
       -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       ${GRANARY_FUZZ_MAX_LEN:+-max_len="$GRANARY_FUZZ_MAX_LEN"} ${GRANARY_FUZZ_FLAGS:-} \
       -artifact_prefix="$artifacts/" "$scratch/$target" "tests/fuzz/corpus/$target" \
       >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$target")
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  edges=$(grep -oE '\(([0-9]+) inline 8-bit counters\)' "$log" | grep -oE '[0-9]+' | head -1 || true)
  corpus=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -1 || true)
  total_execs=$((total_execs + ${execs:-0}))
  echo "fuzz: $target: $status, ${execs:-?} executions, ${cov:-cov: ?} (of ${edges:-?} edges)," \
    "${corpus:-corp: ?}"
  if [[ $status != ok ]]; then
    tail -40 "$log" | sed "s/^/  $target: /"
  fi
done

elapsed=$(($(date +%s) - start))
if ((${#failed[@]})); then
  echo "fuzz: ${#failed[@]} of ${#targets[@]} targets FAILED (${failed[*]}); inputs in $build/fuzz-artifacts/"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, $total_execs executions in ${elapsed}s, nothing found"

#!/usr/bin/env bash
# Installs what is missing, builds once, and runs every test. Tiers, in order:
#   1. the full suite (build/), CUDA code compiled when nvcc exists;                 default
#   2. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/); default
#   3. a clang build (build-fuzz/) of every library that holds a mutex, with -Wthread-safety as
#      errors (common/thread_annotations.h), then a short run of every libFuzzer target of
#      tests/fuzz over its seed corpus (tests/fuzz/run.sh);                             default
#   4. the concurrent parts (work queue, informer, controller runtime, single-flight, bandwidth
#      limits, warm priorities, warmer, mount reads, checkpoint drain) under ThreadSanitizer
#      (build-tsan/); opt-in
# GRANARY_TEST_SANITIZERS=0 skips step 2; GRANARY_TEST_FUZZ=0 skips step 3's fuzzing, not its
# clang build (GRANARY_FUZZ_SECONDS sets the seconds per target, default 5); GRANARY_TEST_TSAN=1
# runs step 4. GRANARY_TEST_KUBECONFIG runs the Kubernetes contract tests against a real cluster
# as well (see docs/development.md).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

scripts/setup.sh
jobs=$(nproc)

scripts/build.sh build -DGRANARY_BUILD_TESTS=ON -DGRANARY_BUILD_BENCH=ON  # benchmarks: built, not run
(cd build && ctest --output-on-failure -j"$jobs" --timeout 600)

if [[ "${GRANARY_TEST_SANITIZERS:-1}" != 0 ]]; then
  # CUDA is left out here: the CUDA runtime and ASan's shadow memory do not mix, and the
  # no-GPU path is what these machines run anyway.
  scripts/build.sh build-asan -DGRANARY_BUILD_TESTS=ON -DGRANARY_SANITIZE=address,undefined \
    -DGRANARY_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
  (
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
    cd build-asan && ctest --output-on-failure -j"$jobs" --timeout 900
  )
fi

# The clang tree: the libraries where threads share state, so that clang's thread-safety analysis
# (an error in every clang build) checks each annotated mutex; then the fuzz targets and the
# libraries they link. A longer fuzz run is in docs/development.md.
clang_targets="granary_common granary_kube granary_scheduler granary_engine_core \
  granary_engine_store granary_engine_origin granary_engine granary_engine_mount \
  granary_engine_gpu granary_checkpoint granary_csi granary_cache_node granary_operator granary_local"
if [[ "${GRANARY_TEST_FUZZ:-1}" != 0 ]]; then clang_targets+=" granary_fuzz"; fi
CXX=clang++ GRANARY_BUILD_TARGET="$clang_targets" scripts/build.sh build-fuzz -DGRANARY_FUZZ=ON \
  -DGRANARY_WITH_CUDA=OFF -DGRANARY_BUILD_TESTS=OFF
if [[ "${GRANARY_TEST_FUZZ:-1}" != 0 ]]; then
  GRANARY_FUZZ_RUNS="${GRANARY_FUZZ_RUNS:-500000}" tests/fuzz/run.sh build-fuzz \
    "${GRANARY_FUZZ_SECONDS:-5}"
fi

if [[ "${GRANARY_TEST_TSAN:-0}" != 0 ]]; then
  # The tests of the code where threads meet; CUDA off as for ASan.
  GRANARY_BUILD_TARGET="kube_test engine_test mount_test" scripts/build.sh build-tsan \
    -DGRANARY_BUILD_TESTS=ON -DGRANARY_SANITIZE=thread -DGRANARY_WITH_CUDA=OFF
  (
    # Every race is reported and fails its test; tests/tsan.supp says what is not granary's.
    export TSAN_OPTIONS="second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp"
    cd build-tsan && ctest --output-on-failure -j"$jobs" --timeout 900 --no-tests=error \
      -R '^(WorkQueue|InformerContract|ControllerTest|SingleFlight|BandwidthLimiter|WarmPriorities|WarmerTest|DatasetCacheTest|BandwidthLimitTest|DatasetFilesystemTest|DrainerTest|S3DrainerTest)\.'
  )
  echo "test.sh: ThreadSanitizer tier passed"
fi

echo "test.sh: all suites passed in $(( $(date +%s) - start ))s"

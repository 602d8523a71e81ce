#!/usr/bin/env bash
# Installs what is missing, builds once, and runs every test:
#   1. the full suite (build/), CUDA code compiled when nvcc exists;
#   2. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/).
# GRANARY_TEST_SANITIZERS=0 skips step 2. GRANARY_TEST_KUBECONFIG runs the Kubernetes
# contract tests against a real cluster as well (see docs/development.md).
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
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
  (cd build-asan && ctest --output-on-failure -j"$jobs" --timeout 900)
fi

echo "test.sh: all suites passed in $(( $(date +%s) - start ))s"

#!/usr/bin/env bash
# Installs what is missing, builds granary, and runs its main job on the embedded defaults:
# every example manifest is decoded and checked as the API server would (defaults, bounds,
# cross-field rules) and summarized, then this machine's GPUs are probed and self-tested.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
GRANARY_BUILD_TARGET=granaryctl scripts/build.sh build >/dev/null
echo
build/cli/granaryctl validate -f examples
echo
build/cli/granaryctl doctor

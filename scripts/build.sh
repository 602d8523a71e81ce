#!/usr/bin/env bash
# Configures and builds one build tree: scripts/build.sh DIR [cmake options...]
# Ninja and ccache keep rebuilds incremental; one tree serves every test. GRANARY_BUILD_TARGET
# builds only the targets it names (space-separated); CXX picks the compiler of a new tree.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
shift
# Objects are cached by paths relative to the checkout, so a clone elsewhere (CI's) reuses them.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
generator=()
[[ -f "$dir/CMakeCache.txt" ]] || generator=(-G Ninja)
cmake -S . -B "$dir" "${generator[@]}" "$@" >/dev/null
targets=()
read -ra targets <<<"${GRANARY_BUILD_TARGET:-}"
cmake --build "$dir" ${targets[@]+--target "${targets[@]}"}

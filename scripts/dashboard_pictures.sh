#!/usr/bin/env bash
# Draws the pictures of docs/dashboards.md from a real run: builds e2e_test, runs it with
# GRANARY_DASHBOARD_PICTURES so that it saves every panel's data from its own Prometheus (a
# worker starved by a throttled origin, its dataset warming, the operator and the scheduler),
# and renders one PNG per dashboard into docs/images/dashboards/ (scripts/render_dashboards.py).
#
#   scripts/dashboard_pictures.sh [BUILD_DIR]    (default: build)
#
# Needs what e2e_test needs (root, /dev/fuse, a writable cgroup hierarchy, Debian's prometheus)
# and installs python3-matplotlib when it is missing. The build takes the lock the build tree's
# other users take (GRANARY_BUILD_LOCK, default /tmp/granary-build.lock).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
if ! installed python3-matplotlib; then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "dashboard_pictures: installing python3-matplotlib"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    python3-matplotlib
fi

flock "${GRANARY_BUILD_LOCK:-/tmp/granary-build.lock}" ninja -C "$build" e2e_test

data=$(mktemp -d /tmp/granary-dashboard-data.XXXXXX)
trap 'rm -rf "$data"' EXIT
GRANARY_DASHBOARD_PICTURES="$data" "$build/tests/e2e_test" --gtest_brief=1
# Debian's matplotlib lives with the system interpreter, which a user-level Python earlier on
# PATH would hide.
/usr/bin/python3 scripts/render_dashboards.py "$data" docs/images/dashboards

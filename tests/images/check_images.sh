#!/usr/bin/env bash
# The image tier (opt-in, not in CI: a first image build compiles everything): builds the image
# with scripts/images.sh, then checks it as the chart runs it:
#   - every binary runs (--help exits 0) and finds every shared library it links;
#   - the operator, the scheduler and the mount keeper (granary-cache-node) run as UID 65532
#     with a read-only root file system;
#   - no compiler in the image;
#   - granary-cache-node warms a Dataset standalone from a file:// origin mounted into the
#     container (--exit-when-warm exits 0 and prints the dataset Ready).
# Containers run with --network none. Environment: GRANARY_CHECK_IMAGES_BUILD=0 checks the image
# already built instead of running scripts/images.sh first; what scripts/images.sh reads
# (GRANARY_IMAGES_PULL=0 keeps it off every registry, GRANARY_IMAGES_REPOSITORY, DOCKER, ...).
# The last line is "N passed, N failed"; the exit status is non-zero when a check failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

docker=${DOCKER:-docker}
repository=${GRANARY_IMAGES_REPOSITORY:-granary}
version=$(sed -nE 's/^project\(granary VERSION ([0-9]+\.[0-9]+\.[0-9]+).*/\1/p' CMakeLists.txt)
image=$repository:$version

if [[ ${GRANARY_CHECK_IMAGES_BUILD:-1} != 0 ]]; then
  if ! scripts/images.sh; then
    echo "check_images: scripts/images.sh failed; nothing checked"
    echo "0 passed, 1 failed"
    exit 1
  fi
fi

passed=0
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"

pass() { passed=$((passed + 1)); echo "PASS  $1"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL  $1"
  [[ -s $work/out ]] && sed 's/^/      | /' "$work/out" | tail -n 25
  return 0
}

# check NAME COMMAND...: passes when COMMAND exits 0 (its output is shown when it fails).
check() {
  local name=$1
  shift
  if "$@" >"$work/out" 2>&1; then pass "$name"; else fail "$name (exit $?)"; fi
}

run() { "$docker" run --rm --network none "$@"; }

# --- the image ---------------------------------------------------------------------------------
if ! "$docker" image inspect "$image" >/dev/null 2>&1; then
  : >"$work/out"
  fail "image $image exists"
  echo "$passed passed, $failed failed"
  exit 1
fi
pass "image $image exists ($("$docker" image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}'))"

same_id() {
  [[ $("$docker" image inspect -f '{{.Id}}' "$image") == \
     $("$docker" image inspect -f '{{.Id}}' "$repository:latest") ]]
}
check "$repository:latest is $image" same_id

app_version=$(sed -nE 's/^appVersion: *"?([^"]*)"?.*/\1/p' charts/granary/Chart.yaml)
check "the chart's appVersion ($app_version) is the image's tag ($version)" \
  test "$app_version" = "$version"

binaries=(granary-operator granary-scheduler granary-cache-node granaryctl)
for binary in "${binaries[@]}"; do
  check "$binary --help" run "$image" "/usr/bin/$binary" --help
done

no_missing_libraries() {
  # shellcheck disable=SC2016 # expanded by the container's shell
  run "$image" sh -c 'for b in "$@"; do ldd "/usr/bin/$b" || exit 1; done' sh "${binaries[@]}" \
    >"$work/ldd" 2>&1 || { cat "$work/ldd"; return 1; }
  ! grep "not found" "$work/ldd"
}
check "every shared library of the binaries is in the image" no_missing_libraries

check "no compiler in the image" \
  run "$image" sh -c '! command -v cc && ! command -v c++ && ! command -v gcc && ! command -v g++'

# As the chart runs them: runAsUser 65532, readOnlyRootFilesystem.
for binary in granary-operator granary-scheduler granary-cache-node; do
  check "$binary --help as UID 65532 on a read-only root" \
    run --user 65532:65532 --read-only "$image" "/usr/bin/$binary" --help
done

# shellcheck disable=SC2016 # expanded by the container's shell
check "UID 65532 is the image's non-root user" \
  run --user 65532 "$image" sh -c '[ "$(id -u)" = 65532 ] && [ "$(id -un)" = nonroot ]'

# --- a standalone warm --------------------------------------------------------------------------
mkdir -p "$work/origin/train/part-1" "$work/origin/eval"
sizes=(1 4096 65536 1048576 3145728 5000001)
files=0
bytes=0
for size in "${sizes[@]}"; do
  head -c "$size" /dev/urandom >"$work/origin/train/part-1/shard-$size.bin"
  files=$((files + 1))
  bytes=$((bytes + size))
done
head -c 12345 /dev/urandom >"$work/origin/eval/labels.bin"
files=$((files + 1))
chmod -R a+rX "$work/origin"
cat >"$work/dataset.yaml" <<EOF
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata:
  name: image-check
  namespace: default
spec:
  source:
    uri: file:///data/origin/
  cache:
    chunkSize: 1Mi
EOF
chmod a+r "$work/dataset.yaml"

# The cache node's container of the chart: root, read-only root file system, /tmp writable.
warm() {
  run --read-only --tmpfs /tmp -v "$work/origin:/data/origin:ro" \
    -v "$work/dataset.yaml:/manifest.yaml:ro" "$image" \
    /usr/bin/granary-cache-node --state-dir /tmp/state --listen 127.0.0.1:0 \
    --transfer-listen 127.0.0.1:0 --metrics-address "" --dataset /manifest.yaml --exit-when-warm
}
if warm >"$work/out" 2>&1; then
  pass "granary-cache-node --dataset --exit-when-warm exits 0 ($files files, $((bytes + 12345)) bytes)"
  if grep -qE "^default/image-check Ready $files/$files files" "$work/out"; then
    pass "the warm prints 'default/image-check Ready $files/$files files'"
  else
    fail "the warm prints 'default/image-check Ready $files/$files files'"
  fi
else
  fail "granary-cache-node --dataset --exit-when-warm exits 0 (exit $?)"
fi

echo "$passed passed, $failed failed"
((failed == 0))

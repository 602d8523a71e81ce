# The granary image: granary-operator, granary-scheduler, granary-cache-node and granaryctl in
# /usr/bin of one Debian 12 (bookworm) image. charts/granary runs it as granary:<appVersion>.
# scripts/images.sh builds it (and makes the base offline when no registry can be reached);
# docs/images.md describes both.
#
#   docker build -t granary:0.1.0 .                     # with BuildKit: ccache kept across builds
#   docker build --build-arg BASE_IMAGE=granary-base:bookworm -t granary:0.1.0 .
#
# Without BuildKit, remove the RUN instruction's --mount flag (scripts/images.sh does).
# No `# syntax=` line on purpose: that would fetch a frontend image from a registry.

# Any Debian 12 root file system: the official image, or debootstrap's (scripts/images.sh).
ARG BASE_IMAGE=debian:bookworm

# ---------------------------------------------------------------------------------------------
# Build stage: the packages of scripts/setup.sh that the build needs, and a Release build.
FROM ${BASE_IMAGE} AS build

# The packages of scripts/setup.sh that building the binaries needs. Left out: what only the
# tests use (libgtest-dev, libgmock-dev, libbenchmark-dev, python3*, nodejs, npm, git, curl).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build ccache pkg-config ca-certificates openssl \
      libcpprest-dev libyaml-cpp-dev prometheus-cpp-dev librocksdb-dev \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libfuse3-dev fuse3 libcurl4-openssl-dev libssl-dev libxxhash-dev \
      libcivetweb-dev libcli11-dev libpugixml-dev \
 && rm -rf /var/lib/apt/lists/*

# Compile jobs (the Ninja default would be every core) and the compile's niceness
# (scripts/images.sh passes its own, so `nice -n 19 scripts/images.sh` yields to other work).
ARG JOBS=2
ARG NICE=0

COPY . /src
WORKDIR /src

# With BuildKit the ccache directory is a cache mount that outlives the image, so a rebuild
# after a small change recompiles little; without it ccache is off (nothing to keep).
# Release at -O2, the level the test suites run (RelWithDebInfo) without the debug info: at
# CMake's -O3, GCC 12 reports false -Wrestrict warnings in std::string's operator+ (GCC PR
# 105329, e.g. common/quantity.cc) and -Werror turns them into errors.
ENV CCACHE_DIR=/root/.cache/ccache
RUN --mount=type=cache,id=granary-ccache,target=/root/.cache/ccache \
    if mountpoint -q "$CCACHE_DIR"; then ccache -z >/dev/null; else export CCACHE_DISABLE=1; fi \
 && CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" nice -n "$NICE" \
      scripts/build.sh /build -DGRANARY_BUILD_TESTS=OFF -DGRANARY_WITH_CUDA=OFF \
      -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
 && if mountpoint -q "$CCACHE_DIR"; then ccache -s; fi \
 && mkdir -p /out \
 && cp /build/operator/granary-operator /build/scheduler/granary-scheduler \
       /build/cache-node/granary-cache-node /build/cli/granaryctl /out/ \
 && strip /out/*

# ---------------------------------------------------------------------------------------------
# Runtime stage: the shared libraries the binaries link (their Debian packages; the rest come
# as those packages' dependencies), fuse3 (fusermount3, /etc/fuse.conf) and the CA
# certificates of https:// and s3:// origins. No compiler, no headers.
FROM ${BASE_IMAGE}

# The base's packages get their latest fixes too (a debootstrapped base is the release as it
# was). nonroot (65532): the user the chart runs the operator, the scheduler and the mount
# keeper as.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get upgrade -y \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates fuse3 libfuse3-3 \
      libcpprest2.10 libyaml-cpp0.7 libprometheus-cpp-core1.0 librocksdb7.8 \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 \
      libcurl4 libssl3 libxxhash0 libcivetweb1 libpugixml1v5 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin' >>/etc/passwd \
 && echo 'nonroot:x:65532:' >>/etc/group

COPY --from=build /out/ /usr/bin/

ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="granary" \
      org.opencontainers.image.description="granary: datasets cached on GPU nodes (operator, scheduler, cache node, granaryctl)" \
      org.opencontainers.image.version="${VERSION}"

# The chart names each container's command; the image's default user stays root because the
# cache node needs it (FUSE mounts), the other containers set runAsUser 65532.
CMD ["/usr/bin/granaryctl", "--help"]

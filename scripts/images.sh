#!/usr/bin/env bash
# Builds the granary image (Dockerfile: all four binaries in one Debian 12 image) with the local
# Docker daemon and tags it granary:<version> (project(granary VERSION ...) of CMakeLists.txt,
# which is the chart's appVersion) and granary:latest.
#
# What it needs, installed or started only when missing (root, or sudo, for that):
#   - Docker: Debian's docker.io when no dockerd exists; dockerd is started here, in the
#     background (log: /var/log/granary-dockerd.log, at this script's niceness), when no
#     daemon answers; it keeps running.
#   - The base image debian:bookworm: used when present, else pulled; when no registry can be
#     reached it is made offline from Debian's mirror with debootstrap (installed when missing)
#     and imported as granary-base:bookworm. The root file system is kept in
#     build-images/ (ignored by git), so later runs import it without downloading again.
#
# Environment:
#   GRANARY_IMAGES_PULL=0        never contact a registry: no `docker pull` of the base
#   GRANARY_IMAGES_JOBS=N        compile jobs inside the build (default 2)
#   GRANARY_IMAGES_BUILDKIT=0|1  force the classic builder / BuildKit (default: BuildKit when
#                                the client has it; it keeps ccache's cache between builds)
#   GRANARY_IMAGES_REPOSITORY    image repository (default granary)
#   GRANARY_IMAGES_CACHE         where the debootstrap result is kept (default build-images)
#   GRANARY_DEBIAN_MIRROR        Debian mirror of debootstrap (default http://deb.debian.org/debian)
#   DOCKER                       the docker client (default docker)
#
# The compile inside runs at this script's niceness: `nice -n 19 scripts/images.sh` yields.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

say() { echo "images.sh: $*"; }
die() { echo "images.sh: error: $*" >&2; exit 1; }

docker=${DOCKER:-docker}
repository=${GRANARY_IMAGES_REPOSITORY:-granary}
jobs=${GRANARY_IMAGES_JOBS:-2}
cache=${GRANARY_IMAGES_CACHE:-build-images}
mirror=${GRANARY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
upstream_base=debian:bookworm
offline_base=granary-base:bookworm

version=$(sed -nE 's/^project\(granary VERSION ([0-9]+\.[0-9]+\.[0-9]+).*/\1/p' CMakeLists.txt)
[[ -n $version ]] || die "no 'project(granary VERSION x.y.z' line in CMakeLists.txt"
app_version=$(sed -nE 's/^appVersion: *"?([^"]*)"?.*/\1/p' charts/granary/Chart.yaml 2>/dev/null || true)
if [[ -n $app_version && $app_version != "$version" ]]; then
  say "warning: charts/granary/Chart.yaml appVersion is $app_version, CMakeLists.txt says $version;" \
      "the chart runs ${repository}:${app_version}"
fi

sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"

# install PACKAGE...: Debian packages, with apt-get (once per run).
apt_updated=0
install() {
  say "installing $* (apt-get)"
  if [[ -n $sudo ]] && ! command -v sudo >/dev/null; then
    die "installing $* needs root; run as root or install them first"
  fi
  if ((apt_updated == 0)); then $sudo apt-get update -qq || die "apt-get update failed"; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" \
    || die "apt-get install $* failed"
}

# --- Docker: the client, and a daemon that answers -------------------------------------------
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v "$docker" >/dev/null || missing+=(docker.io)
if ((${#missing[@]})); then install docker.io; fi
command -v "$docker" >/dev/null || docker=/usr/bin/docker

daemon_up() { "$docker" info >/dev/null 2>&1; }

# start_dockerd LOG [dockerd options...]: starts dockerd in the background, waits up to 60 s.
start_dockerd() {
  local log=$1
  shift
  say "starting dockerd $* (log: $log)"
  # setsid: the daemon outlives this script and is not in its process group.
  $sudo setsid dockerd "$@" >"$log" 2>&1 </dev/null &
  local pid=$!
  for _ in $(seq 60); do
    daemon_up && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  echo "images.sh: dockerd $* did not come up; the end of $log:" >&2
  tail -n 15 "$log" >&2 || true
  kill "$pid" 2>/dev/null || true
  return 1
}

if ! daemon_up; then
  if "$docker" info 2>&1 | grep -qi "permission denied"; then
    die "a Docker daemon runs but '$docker info' is refused: as a non-root user, join the" \
        "docker group (or run as root)"
  fi
  [[ -z $sudo ]] || command -v sudo >/dev/null || die "no Docker daemon answers and starting one needs root"
  # First as Docker would start by default; then without the kernel features sandboxes and
  # nested containers often lack (iptables NAT, the bridge, overlayfs). Builds and the tests use
  # the host's network or none, so they do not need the bridge.
  start_dockerd /var/log/granary-dockerd.log ||
    start_dockerd /var/log/granary-dockerd.log --iptables=false --ip6tables=false --bridge=none \
      --storage-driver=vfs ||
    die "could not start dockerd (logs above); start a Docker daemon and run this again"
fi
say "docker daemon $("$docker" version --format '{{.Server.Version}}' 2>/dev/null)," \
    "storage $("$docker" info --format '{{.Driver}}' 2>/dev/null)"

# --- The base image ---------------------------------------------------------------------------
have_image() { "$docker" image inspect "$1" >/dev/null 2>&1; }

# make_offline_base: debootstrap (cached in $cache) and docker import as $offline_base.
make_offline_base() {
  local tarball=$cache/debian-bookworm-minbase.tar
  if [[ ! -s $tarball ]]; then
    command -v debootstrap >/dev/null || install debootstrap
    [[ -z $sudo ]] || die "debootstrap needs root; run this script as root"
    mkdir -p "$cache"
    local rootfs=$cache/rootfs.tmp
    rm -rf "$rootfs" "$tarball.tmp"
    say "debootstrap --variant=minbase bookworm from $mirror (about 35 MB; kept in $tarball)"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
      tail -n 20 "$cache/debootstrap.log" >&2
      die "debootstrap failed (whole log: $cache/debootstrap.log)"
    }
    # The sources of the official image: the release, its updates and its security fixes.
    rm -f "$rootfs/etc/apt/sources.list"
    cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: ${mirror}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    # The release's packages with today's fixes (the Dockerfile upgrades again, for an old cache).
    say "applying bookworm-updates and bookworm-security to the base"
    chroot "$rootfs" sh -c 'apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get upgrade -y -qq && apt-get clean' \
      >>"$cache/debootstrap.log" 2>&1 ||
      say "warning: could not upgrade the base's packages (see $cache/debootstrap.log); the" \
          "image's runtime stage upgrades them"
    : >"$rootfs/etc/resolv.conf"
    rm -rf "${rootfs:?}"/var/cache/apt/archives/*.deb "${rootfs:?}"/var/lib/apt/lists/* \
      "${rootfs:?}"/dev/* "${rootfs:?}"/proc/* "${rootfs:?}"/sys/*
    find "$rootfs/var/log" -type f -delete
    : >"$rootfs/etc/hostname"
    tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" . || die "could not archive $rootfs"
    mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
  else
    say "using the cached root file system $tarball"
  fi
  "$docker" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' "$tarball" "$offline_base" >/dev/null ||
    die "docker import of $tarball failed"
  say "imported $offline_base"
}

if have_image "$upstream_base"; then
  base=$upstream_base
elif have_image "$offline_base"; then
  base=$offline_base
elif [[ ${GRANARY_IMAGES_PULL:-1} != 0 ]] && timeout 120 "$docker" pull -q "$upstream_base"; then
  base=$upstream_base
else
  if [[ ${GRANARY_IMAGES_PULL:-1} != 0 ]]; then
    say "could not pull $upstream_base; making the base from Debian's mirror instead"
  fi
  make_offline_base
  base=$offline_base
fi
say "base image: $base"

# --- The build --------------------------------------------------------------------------------
# BuildKit when the client has it (buildx, or a client older than 23 with its built-in
# BuildKit); Debian's docker.io client is tried when the first client lacks it.
builder=()
buildkit=${GRANARY_IMAGES_BUILDKIT:-auto}
if [[ $buildkit != 0 ]]; then
  for client in "$docker" /usr/bin/docker; do
    command -v "$client" >/dev/null || continue
    if "$client" buildx version >/dev/null 2>&1; then
      builder=("$client" buildx build --load)
      break
    fi
    major=$("$client" version --format '{{.Client.Version}}' 2>/dev/null | cut -d. -f1)
    if [[ $major =~ ^[0-9]+$ ]] && ((major < 23)); then
      builder=(env DOCKER_BUILDKIT=1 "$client" build)
      break
    fi
  done
  [[ ${#builder[@]} -gt 0 || $buildkit == auto ]] || die "GRANARY_IMAGES_BUILDKIT=1 but no docker client with BuildKit"
fi
plain=0
if ((${#builder[@]} == 0)); then
  say "building without BuildKit (no ccache between builds)"
  builder=(env DOCKER_BUILDKIT=0 "$docker" build)
  plain=1
fi

niceness=$(nice)
args=(--network host --build-arg BASE_IMAGE="$base" --build-arg JOBS="$jobs"
      --build-arg NICE="$niceness" --build-arg VERSION="$version"
      -t "$repository:$version" -t "$repository:latest")
say "building $repository:$version and $repository:latest with ${builder[*]} (-j$jobs, nice" \
    "$niceness); a first build compiles all of granary (minutes)"
build_start=$(date +%s)
if ((plain)); then
  # The classic builder knows no RUN --mount: the same Dockerfile without it, on stdin.
  sed -E 's/^RUN --mount=[^ ]+ +/RUN /' Dockerfile | "${builder[@]}" -f - "${args[@]}" . ||
    die "docker build failed (output above)"
else
  "${builder[@]}" -f Dockerfile "${args[@]}" . || die "docker build failed (output above)"
fi
say "built in $(( $(date +%s) - build_start ))s (whole run $(( $(date +%s) - start ))s):"
"$docker" images "$repository"

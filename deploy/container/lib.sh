# Sourced by the scripts of deploy/container: the engine, its settings and the cache, as the
# make targets' variables (docs/deployment.md, "Three ways to run it") name them.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
# podman's runtime, cgroup manager and ulimits for machines without systemd (containers.conf).
export CONTAINERS_CONF="${CONTAINERS_CONF:-$HERE/containers.conf}"
if [ -z "${CONTAINER_ENGINE:-}" ]; then
  if command -v podman >/dev/null 2>&1; then CONTAINER_ENGINE=podman; else CONTAINER_ENGINE=docker; fi
fi
ENGINE="$CONTAINER_ENGINE"
IMAGE="${IMAGE:-localhost/agentsite:latest}"
PUBLIC_BASE_IMAGE="docker.io/library/python:3.11-slim-bookworm"
LOCAL_BASE_IMAGE="localhost/agentsite-base:bookworm"
# What is slow to make (the base's tarball, the build's CA copy) is kept here, outside the checkout.
CACHE_DIR="${AGENTSITE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentsite}"
mkdir -p "$CACHE_DIR"

say() { echo "deploy: $*" >&2; }

have_image() { "$ENGINE" image exists "$1" 2>/dev/null || "$ENGINE" image inspect "$1" >/dev/null 2>&1; }

# The build's extra flags: BUILD_FLAGS as given, and, when the host trusts a CA bundle of its own
# (package traffic passing a proxy that re-signs TLS), that bundle with a pip.conf naming it,
# mounted read-only for the build's RUN steps only (no layer keeps them).
build_flags() {
  local bundle="${PIP_CERT:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}}"
  local flags=()
  if [ "$ENGINE" = podman ]; then flags+=(--format docker); fi  # OCI drops HEALTHCHECK
  if [ -f "$bundle" ]; then
    local dir="$CACHE_DIR/build-ca"
    mkdir -p "$dir"
    cp "$bundle" "$dir/ca.crt"
    { echo "[global]"; echo "cert = /run/agentsite-build/ca.crt"
      if [ -n "${PIP_INDEX_URL:-}" ]; then echo "index-url = $PIP_INDEX_URL"; fi
    } > "$dir/pip.conf"
    flags+=(--volume "$dir:/run/agentsite-build:ro" --build-arg PIP_CONFIG_FILE=/run/agentsite-build/pip.conf)
  fi
  # shellcheck disable=SC2206 # BUILD_FLAGS is a list of flags, split on spaces
  flags+=(${BUILD_FLAGS:-})
  printf '%s\n' "${flags[@]}"
}

# The image's size as `podman image inspect` counts it (uncompressed), in MB.
image_size_mb() { "$ENGINE" image inspect --format '{{.Size}}' "$1" | awk '{printf "%.0f", $1 / 1000000}'; }

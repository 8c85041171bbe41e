#!/usr/bin/env bash
# The local base image, for machines that reach Debian's mirror but no container registry:
# a minimal bookworm with python3 and its venv module (mmdebstrap), imported as
# localhost/agentsite-base:bookworm. The tarball is cached (about 100 s to make on 2 cores).
source "$(dirname "$0")/lib.sh"

tarball="$CACHE_DIR/agentsite-base-bookworm.tar"
if [ "${1:-}" = "--rebuild" ] || [ ! -s "$tarball" ]; then
  command -v mmdebstrap >/dev/null || { say "mmdebstrap is missing: make container-tools"; exit 1; }
  say "making the local base with mmdebstrap into $tarball"
  # Debian's security suite too: the base of a server image gets its fixes.
  mmdebstrap --quiet --format=tar --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$tarball.part" \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main"
  mv "$tarball.part" "$tarball"
fi
if [ "${1:-}" = "--rebuild" ] || ! have_image "$LOCAL_BASE_IMAGE"; then
  say "importing $tarball as $LOCAL_BASE_IMAGE"
  "$ENGINE" import --quiet --change 'CMD ["/bin/bash"]' "$tarball" "$LOCAL_BASE_IMAGE" >/dev/null
fi
echo "$LOCAL_BASE_IMAGE"

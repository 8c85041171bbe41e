#!/usr/bin/env bash
# `make image`: the app image from the Containerfile. Its base is BASE_IMAGE when given; else the
# public Python image when it can be pulled; else (OFFLINE=1, or no registry) the local base.
source "$(dirname "$0")/lib.sh"

base="${BASE_IMAGE:-}"
if [ "${OFFLINE:-}" = 1 ]; then
  base="$("$HERE/base.sh")"
elif [ -z "$base" ]; then
  if have_image "$PUBLIC_BASE_IMAGE" || "$ENGINE" pull -q "$PUBLIC_BASE_IMAGE" >/dev/null 2>&1; then
    base="$PUBLIC_BASE_IMAGE"
  else
    say "$PUBLIC_BASE_IMAGE cannot be pulled: building on the local base"
    base="$("$HERE/base.sh")"
  fi
fi

version="$(python3 -c "import tomllib; print(tomllib.load(open('$ROOT/pyproject.toml', 'rb'))['project']['version'])")"
vcs_ref="${VCS_REF:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || true)}"
# A public address only: a clone's origin may be a path on the building machine.
source_url="${SOURCE_URL:-$(git -C "$ROOT" remote get-url origin 2>/dev/null | grep '^https://' || true)}"
mapfile -t flags < <(build_flags)
say "building $IMAGE on $base"
start=$SECONDS
"$ENGINE" build "${flags[@]}" \
  --build-arg BASE_IMAGE="$base" --build-arg VERSION="$version" --build-arg VCS_REF="$vcs_ref" --build-arg SOURCE_URL="$source_url" \
  --file "$ROOT/Containerfile" --tag "$IMAGE" "$ROOT"
say "built $IMAGE in $((SECONDS - start)) s: $(image_size_mb "$IMAGE") MB (uncompressed, on $base)"

#!/usr/bin/env bash
# The offline stand-ins for the stack's other images: localhost/agentsite-{postgres,redis,nginx},
# built from the local base with Debian's packages (standins/*/Containerfile) when missing, or all
# again with --rebuild. Prints the three image names as compose.yaml's variables.
source "$(dirname "$0")/lib.sh"

base="$("$HERE/base.sh")"
mapfile -t flags < <(build_flags)
for name in postgres redis nginx; do
  image="localhost/agentsite-$name:latest"
  if [ "${1:-}" = "--rebuild" ] || ! have_image "$image"; then
    say "building the stand-in $image on $base"
    "$ENGINE" build "${flags[@]}" --quiet --build-arg BASE_IMAGE="$base" --tag "$image" "$HERE/standins/$name" >/dev/null
  fi
  upper="$(echo "$name" | tr a-z A-Z)"
  echo "${upper}_IMAGE=$image"
done

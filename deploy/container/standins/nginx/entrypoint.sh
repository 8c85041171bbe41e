#!/bin/sh
# As the official image's /docker-entrypoint.sh: before nginx starts, the executable *.envsh of
# /docker-entrypoint.d/ are sourced and its executable *.sh run, in name order (the image's own
# 15-local-resolvers.envsh and 20-envsubst-on-templates.sh among them, and any mounted there).
set -eu
if [ "${1:-}" = nginx ]; then
  for script in /docker-entrypoint.d/*; do
    [ -x "$script" ] || continue
    case "$script" in
      *.envsh) . "$script" ;;
      *.sh) "$script" ;;
    esac
  done
fi
exec "$@"

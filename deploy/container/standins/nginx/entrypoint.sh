#!/bin/sh
# What the official image's entrypoint scripts 15-local-resolvers.envsh and
# 20-envsubst-on-templates.sh do, for the stand-in.
set -eu
if [ "${1:-}" = nginx ]; then
  if [ -n "${NGINX_ENTRYPOINT_LOCAL_RESOLVERS:-}" ]; then
    NGINX_LOCAL_RESOLVERS="$(awk 'BEGIN{ORS=" "} $1=="nameserver" {if ($2 ~ ":") {print "["$2"]"} else {print $2}}' /etc/resolv.conf)"
    export NGINX_LOCAL_RESOLVERS="${NGINX_LOCAL_RESOLVERS% }"
  fi
  defined="$(env | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/${\1}/p' | tr '\n' ' ')"
  for template in /etc/nginx/templates/*.template; do
    [ -e "$template" ] || continue
    output="/etc/nginx/conf.d/$(basename "$template" .template)"
    envsubst "$defined" < "$template" > "$output"
    echo "nginx stand-in: rendered $template into $output"
  done
fi
exec "$@"

#!/bin/sh
# The official image's: each /etc/nginx/templates/NAME.template into /etc/nginx/conf.d/NAME, with
# the environment's variables (only those defined, so nginx's own $variables stay).
set -eu
defined="$(env | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/${\1}/p' | tr '\n' ' ')"
for template in /etc/nginx/templates/*.template; do
  [ -e "$template" ] || continue
  output="/etc/nginx/conf.d/$(basename "$template" .template)"
  envsubst "$defined" < "$template" > "$output"
  echo "nginx stand-in: rendered $template into $output"
done

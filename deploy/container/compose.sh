#!/usr/bin/env bash
# `make compose-up` / `make compose-down` (docs/deployment.md, "Three ways to run it"): compose.yaml's stack with the
# env file AGENTSITE_ENV_FILE. `up` builds or makes what is missing (the app image; with
# OFFLINE=1, or no registry, the local stand-ins for postgres, redis and nginx), starts the
# stack and waits until it is healthy; it exits non-zero if that fails. `down` removes the
# containers and the network and keeps the named volumes.
source "$(dirname "$0")/lib.sh"

action="${1:?usage: compose.sh up|down}"
cd "$ROOT"
export COMPOSE_PROJECT_NAME="${COMPOSE_PROJECT_NAME:-agentsite}"
env_file="${AGENTSITE_ENV_FILE:-.env}"
case "$env_file" in /*) ;; *) env_file="$ROOT/$env_file" ;; esac
export AGENTSITE_ENV_FILE="$env_file"
export AGENTSITE_IMAGE="${AGENTSITE_IMAGE:-$IMAGE}"
HEALTH_TIMEOUT="${HEALTH_TIMEOUT:-300}"

if [ -z "${COMPOSE:-}" ]; then
  if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"
  elif command -v docker-compose >/dev/null 2>&1; then COMPOSE=docker-compose
  else COMPOSE=podman-compose; fi
fi
read -r -a compose <<< "$COMPOSE"

# docker-compose talks the Docker API: under podman, to `podman system service` on a socket of
# its own (started once, left running for the next `down`; its pid is kept beside the socket).
if [ "$ENGINE" = podman ] && [ "${compose[0]}" != podman-compose ] && [ -z "${DOCKER_HOST:-}" ]; then
  socket="$CACHE_DIR/podman.sock"
  if ! curl -s --unix-socket "$socket" http://d/_ping >/dev/null 2>&1; then
    rm -f "$socket"
    nohup podman system service --time=0 "unix://$socket" >"$CACHE_DIR/podman-service.log" 2>&1 &
    echo $! > "$CACHE_DIR/podman-service.pid"
    for _ in $(seq 50); do curl -s --unix-socket "$socket" http://d/_ping >/dev/null 2>&1 && break; sleep 0.2; done
  fi
  export DOCKER_HOST="unix://$socket"
fi

run_compose() { "${compose[@]}" --file "$ROOT/compose.yaml" --env-file "$env_file" "$@"; }

containers() { "$ENGINE" ps -a --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" --format '{{.Names}}'; }

# Without systemd podman runs no healthcheck by itself (its timers are systemd units): whoever
# waits for health runs them. Once over the stack's running containers.
run_healthchecks() {
  [ "$ENGINE" = podman ] || return 0
  local name
  for name in $("$ENGINE" ps --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" --format '{{.Names}}'); do
    "$ENGINE" healthcheck run "$name" >/dev/null 2>&1 || true
  done
}

# migrate exited 0; app1, app2, postgres, redis and nginx running and healthy.
stack_state() {
  local service name state
  for service in migrate app1 app2 postgres redis nginx; do
    name="$(containers | grep -E "^${COMPOSE_PROJECT_NAME}[_-]${service}[_-]1$" | head -1)"
    if [ -z "$name" ]; then echo "$service:missing"; continue; fi
    state="$("$ENGINE" inspect --format '{{.State.Status}}/{{.State.ExitCode}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$name")"
    echo "$service:$state"
  done
}

stack_healthy() {
  local states
  states="$(stack_state)"
  echo "$states" | grep -q '^migrate:exited/0/' || return 1
  [ "$(echo "$states" | grep -v '^migrate:' | grep -c '^[a-z0-9]*:running/[0-9]*/healthy$')" -eq 5 ]
}

wait_healthy() {
  local deadline=$((SECONDS + HEALTH_TIMEOUT))
  while ! stack_healthy; do
    if echo "$(stack_state)" | grep -Eq '^migrate:exited/[1-9]|:exited/.*/unhealthy'; then
      say "the stack failed:"; stack_state >&2; return 1
    fi
    [ $SECONDS -lt $deadline ] || { say "not healthy in $HEALTH_TIMEOUT s:"; stack_state >&2; return 1; }
    run_healthchecks
    sleep 2
  done
}

case "$action" in
  up)
    [ -f "$env_file" ] || { say "no env file $env_file: cp deploy/compose.env.example .env and fill it in"; exit 1; }
    have_image "$AGENTSITE_IMAGE" || IMAGE="$AGENTSITE_IMAGE" "$HERE/image.sh"
    if [ "${OFFLINE:-}" = 1 ] || { [ -z "${POSTGRES_IMAGE:-}${REDIS_IMAGE:-}${NGINX_IMAGE:-}" ] \
         && ! have_image docker.io/library/postgres:16-bookworm \
         && ! "$ENGINE" pull -q docker.io/library/postgres:16-bookworm >/dev/null 2>&1; }; then
      say "no registry: the local stand-ins for postgres, redis and nginx"
      while IFS= read -r assignment; do export "${assignment?}"; done < <("$HERE/standins.sh")
    fi
    # While docker-compose waits for a healthy service, the healthchecks are run beside it.
    ( while sleep 2; do run_healthchecks; done ) & checker=$!
    trap 'kill $checker 2>/dev/null || true' EXIT
    status=0
    run_compose up -d --no-build || status=$?
    kill $checker 2>/dev/null || true
    if [ $status -ne 0 ]; then say "compose up failed ($status)"; stack_state >&2; exit $status; fi
    wait_healthy
    say "healthy: https://${AGENTSITE_HOST:-localhost}:${AGENTSITE_HTTPS_PORT:-8443}/"
    ;;
  down)
    run_compose down
    ;;
  state)
    run_healthchecks; stack_state
    ;;
  *)
    say "usage: compose.sh up|down|state"; exit 2 ;;
esac

#!/usr/bin/env bash
# `make compose`: build the stack's images from Debian packages (scripts/compose/images.py, no registry),
# write the Prefect API's basic-auth secret once, `docker-compose up -d`, and wait until every long-running
# service is healthy and the one-shot `deploy` service has registered the deployments. Installs Debian's
# docker-compose when missing (root on Debian).
# Environment: PY (default .venv/bin/python), COMPOSE_PROJECT_NAME (default klear), KLEAR_PREFECT_PORT,
# KLEAR_DASK_DASHBOARD_PORT, KLEAR_COMPOSE_TIMEOUT (seconds to wait for health, default 900),
# KLEAR_COMPOSE_ENV_FILE (the secret's env file, default .klear-compose.env), COMPOSE_FILE (e.g.
# docker-compose.yml:docker-compose.gpu.yml for GPUs on the klear-gpu worker).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-klear}
timeout=${KLEAR_COMPOSE_TIMEOUT:-900}
start=$(date +%s)

if ! command -v docker-compose >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
    echo "compose: installing docker-compose (apt)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
  else
    echo "compose: docker-compose not found; install it (Debian: apt-get install docker-compose)" >&2
    exit 1
  fi
fi

# The API's basic-auth string "klear:<random>", written once (mode 600) and read by every app service
# (env_file in docker-compose.yml): the server as PREFECT_SERVER_API_AUTH_STRING, clients as
# PREFECT_API_AUTH_STRING. An existing file is kept, so the password survives `down` and `up`.
export KLEAR_COMPOSE_ENV_FILE=${KLEAR_COMPOSE_ENV_FILE:-.klear-compose.env}
if [ ! -s "$KLEAR_COMPOSE_ENV_FILE" ]; then
  secret="klear:$("$PY" -c 'import secrets; print(secrets.token_urlsafe(24))')"
  (umask 077 && printf '%s\n' "# Prefect API basic auth of the klear compose stack (written by scripts/compose/up.sh; keep it secret)" \
    "PREFECT_SERVER_API_AUTH_STRING=$secret" "PREFECT_API_AUTH_STRING=$secret" > "$KLEAR_COMPOSE_ENV_FILE")
  echo "compose: wrote a new API password to $KLEAR_COMPOSE_ENV_FILE" >&2
fi

"$PY" scripts/compose/images.py
built=$(date +%s)
docker-compose up -d

services="postgres prefect-server dask-scheduler dask-worker-1 dask-worker-2 prefect-worker prefect-gpu-worker"
while :; do
  pending=""
  for s in $services; do
    id=$(docker-compose ps -q "$s")
    state=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id" 2>/dev/null || echo missing)
    [ "$state" = healthy ] || pending="$pending $s($state)"
  done
  deploy_id=$(docker-compose ps -q deploy)
  deploy=$(docker inspect -f '{{.State.Status}}:{{.State.ExitCode}}' "$deploy_id" 2>/dev/null || echo missing)
  case $deploy in
    exited:0) ;;
    exited:*) docker-compose logs --tail 40 deploy >&2; echo "compose: the deploy service failed" >&2; exit 1 ;;
    *) pending="$pending deploy($deploy)" ;;
  esac
  [ -z "$pending" ] && break
  if [ $(( $(date +%s) - start )) -gt "$timeout" ]; then
    echo "compose: not healthy after ${timeout}s:$pending (docker-compose logs for details)" >&2
    exit 1
  fi
  sleep 3
done
now=$(date +%s)
echo "compose: images $(( built - start ))s, stack healthy $(( now - built ))s after up (project $COMPOSE_PROJECT_NAME)"
echo "compose: Prefect UI http://127.0.0.1:${KLEAR_PREFECT_PORT:-4200}  Dask dashboard http://127.0.0.1:${KLEAR_DASK_DASHBOARD_PORT:-8787}"
echo "compose: Prefect UI login and API clients: the user:password in PREFECT_API_AUTH_STRING of $KLEAR_COMPOSE_ENV_FILE"
echo "compose: export PREFECT_API_URL=http://127.0.0.1:${KLEAR_PREFECT_PORT:-4200}/api PREFECT_API_AUTH_STRING=\$(sed -n 's/^PREFECT_API_AUTH_STRING=//p' $KLEAR_COMPOSE_ENV_FILE)"
echo "compose: .venv/bin/prefect deployment run 'pipeline/demo' --param store=/data/store --watch"

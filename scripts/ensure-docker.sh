#!/usr/bin/env bash
# Make sure a Docker engine answers. On Debian as root with none running: install docker.io
# (and debootstrap, used to build the sandbox image without a registry) and start dockerd.
# Elsewhere: print what to do and fail.
set -euo pipefail
log=${KLEAR_DOCKERD_LOG:-/tmp/klear-dockerd.log}

if docker info >/dev/null 2>&1; then exit 0; fi

# one run at a time (make starts one in the background while the venv installs: sandbox-prefetch.sh);
# a run that waited finds the engine the other started. dockerd is started without the lock's descriptor,
# so the lock ends with the run that took it.
lock="${TMPDIR:-/tmp}/klear-ensure-docker-$(id -u).lock"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$lock"
  if ! flock -w 600 9; then
    echo "ensure-docker: another ensure-docker run held $lock for 10 minutes; is apt or dockerd stuck?" >&2
    exit 1
  fi
  if docker info >/dev/null 2>&1; then exit 0; fi
fi

if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
  echo "ensure-docker: no Docker engine answers 'docker info'; start one (e.g. 'sudo systemctl start docker') and retry" >&2
  exit 1
fi

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "ensure-docker: installing ${need[*]} (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "ensure-docker: starting dockerd (log: $log)" >&2
  setsid dockerd >"$log" 2>&1 < /dev/null 9>&- &
fi
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then exit 0; fi
  sleep 1
done
echo "ensure-docker: dockerd did not answer within 60 s; see $log" >&2
exit 1

#!/usr/bin/env bash
# Started by `make` before the venv's packages install, and returns at once: in the background, make sure a
# Docker engine answers (scripts/ensure-docker.sh) and debootstrap the sandbox image's root filesystem
# (sandbox/image.py prefetch_rootfs: standard library only, so the venv's bare python runs it). Installing
# the project and building the root filesystem then share the time; whatever builds the image afterwards
# (`make sandbox-image`, or the demo's verify stage) finds the tarball (or waits on the build lock for it)
# and only imports the image. Nothing here is required:
# a failure is left in the log, and `make docker` / `klear sandbox build` meet it again and say so.
# Usage: scripts/sandbox-prefetch.sh PYTHON
set -uo pipefail
py=${1:-python3}
log=${KLEAR_PREFETCH_LOG:-${TMPDIR:-/tmp}/klear-sandbox-prefetch-$(id -u).log}
cd "$(dirname "$0")/.."
(
  bash scripts/ensure-docker.sh &&
  "$py" -c 'import sys; sys.path.insert(0, "."); from sandbox.image import prefetch_rootfs; print("prefetch:", prefetch_rootfs())'
) >"$log" 2>&1 </dev/null &

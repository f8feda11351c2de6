"""FSDP2 as the trainers shard (tasks/training/distributed.py) on 2 gloo ranks: with bf16 the
mixed-precision policy gathers bf16 parameters for the forward and reduces fp32 gradients into fp32
master shards; without, everything stays fp32; shard_group_size builds the HSDP mesh (replicate × shard)
and a size that does not divide the ranks is refused; a sharded checkpoint of the HSDP mesh loads into the
1-D mesh tensor for tensor. The config checks shard_group_size on its own."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.config_checks import ConfigError
from tasks.training.config import RLConfig, SFTConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two torchrun ranks
def test_mixed_precision_policy_and_hsdp_mesh_on_two_ranks(tmp_path):
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        str(ROOT / "tests/training/fsdp_ranks.py"), str(tmp_path)],
                       cwd=ROOT, timeout=300, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-5000:]
    for rank in (0, 1):
        rep = json.loads((tmp_path / f"rank-{rank}.json").read_text())
        assert rep["meshes"] == {"None": {"shape": [2], "names": ["shard"]},
                                 "1": {"shape": [2, 1], "names": ["replicate", "shard"]},
                                 "2": {"shape": [2], "names": ["shard"]}}
        assert rep["bad_group"] == "shard_group_size 3 must divide the 2 ranks"
        assert rep["bf16"] == {"forward_weight_dtype": "torch.bfloat16", "param_dtype": "torch.bfloat16",
                               "reduce_dtype": "torch.float32", "grad_dtype": "torch.float32",
                               "stored_dtype": "torch.float32", "placements": ["Shard(dim=0)"]}
        assert rep["fp32"] == {"forward_weight_dtype": "torch.float32", "param_dtype": "None", "reduce_dtype": "None",
                               "grad_dtype": "torch.float32", "stored_dtype": "torch.float32",
                               "placements": ["Shard(dim=0)"]}
        assert rep["hsdp"]["forward_weight_dtype"] == "torch.bfloat16"
        assert rep["hsdp"]["placements"] == ["Replicate()", "Shard(dim=0)"]
        assert rep["hsdp_resharded_equal"] is True


@pytest.mark.parametrize("cls", [SFTConfig, RLConfig])
def test_shard_group_size_needs_fsdp_and_a_positive_size(cls):
    assert cls(strategy="fsdp", shard_group_size=8).shard_group_size == 8
    with pytest.raises(ConfigError, match=r"shard_group_size \(--shard-group-size\) needs --strategy fsdp"):
        cls(shard_group_size=8)
    with pytest.raises(ConfigError, match=r"shard_group_size \(--shard-group-size\) must be at least 1"):
        cls(strategy="fsdp", shard_group_size=0)

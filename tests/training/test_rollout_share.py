"""rollout_share: how a step's prompt groups are split over ranks and tensor-parallel engine groups."""
import pytest

from tasks.training.rl_engine import rollout_share


def test_one_rank_per_engine_is_the_plain_round_robin():
    for rank in range(4):
        share = rollout_share(10, rank, 4)
        assert share.generate == list(range(rank, 10, 4)) and share.grade == list(range(len(share.generate)))
        assert (share.seed_slot, share.seed_slots) == (rank, 4)


@pytest.mark.parametrize("groups, world, tp", [(10, 4, 2), (7, 8, 4), (3, 4, 4), (16, 8, 2), (1, 2, 2)])
def test_every_group_is_generated_by_one_engine_and_kept_by_one_rank(groups, world, tp):
    kept = []
    for rank in range(world):
        share = rollout_share(groups, rank, world, tp)
        partner = rollout_share(groups, rank - rank % tp, world, tp)  # the first rank of its engine group
        assert share.generate == partner.generate and share.seed_slot == partner.seed_slot  # same requests
        kept += [share.generate[i] for i in share.grade]
    assert sorted(kept) == list(range(groups))


def test_tensor_parallel_needs_vllm_and_at_least_one():
    from tasks.config_checks import ConfigError
    from tasks.training.config import RLConfig

    with pytest.raises(ConfigError, match="vllm backend"):
        RLConfig(tensor_parallel=2, backend="hf")
    with pytest.raises(ConfigError, match="tensor_parallel"):
        RLConfig(tensor_parallel=0)
    assert RLConfig(tensor_parallel=2, backend="vllm").tensor_parallel == 2


def test_engine_layout_rules():
    from tasks.training.rl_engine import engine_layout_problem

    assert engine_layout_problem(4, 2, 2) is None and engine_layout_problem(2, 1, 1) is None
    assert engine_layout_problem(4, 1, 1) is None  # independent engines (tp 1): a rank may get no group
    assert engine_layout_problem(4, 3, 8).startswith("--tensor-parallel 3: must divide --nproc 4")
    assert engine_layout_problem(8, 2, 3).startswith("--prompts-per-step 3: fewer than the 4 vLLM engines")


def test_a_bf16_update_generates_with_a_bf16_copy_refreshed_in_place(tmp_path):
    """The transformers engine of a bf16 update (the GPU default) is a bf16 copy of the policy; after an
    update every parameter reaches it cast to bf16 (forced on CPU). An fp32 update generates with the policy
    itself."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tasks.models.factory import init_model
    from tasks.training.rl_engine import make_rollout_engine, rollout_batch_rows

    model_dir = init_model(tmp_path / "m", [f"{a} plus {b} is {a + b}" for a in range(5) for b in range(5)], seed=0)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    policy = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    assert make_rollout_engine(policy, tok, str(model_dir), "hf", 64, sharded=False).model is policy
    engine = make_rollout_engine(policy, tok, str(model_dir), "hf", 64, sharded=False, dtype=torch.bfloat16)
    assert engine.model is not policy and all(p.dtype == torch.bfloat16 for p in engine.model.parameters())
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.25)                        # what an update does, in large
    engine.sync_weights(policy)
    own = dict(engine.model.named_parameters())
    assert all(torch.equal(own[n], p.to(torch.bfloat16)) for n, p in policy.named_parameters())
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert rollout_batch_rows(gpu, 16, 8) == 128 and rollout_batch_rows(cpu, 16, 8) == 64  # a whole step on a GPU

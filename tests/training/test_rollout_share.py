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

"""keep_default_process_group: while a vLLM engine shuts down, the trainer's default process group survives
(vLLM's shutdown ends with `torch.distributed.destroy_process_group()`), its other groups do not, and
without `keep` nothing is changed. The engine itself is exercised under torchrun in
tests/training/test_rl.py::test_four_ranks_fsdp_with_tensor_parallel_vllm_engines."""
import pytest
import torch
import torch.distributed as dist

from tasks.generation.vllm_backend import keep_default_process_group


@pytest.fixture
def one_rank_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    yield
    if dist.is_initialized():  # whatever the test left: later tests must be able to start their own
        dist.destroy_process_group()


def test_the_default_group_survives_a_shutdown_that_destroys_it(one_rank_group):
    sub = dist.new_group([0])
    with keep_default_process_group(True):
        dist.destroy_process_group(sub)  # vLLM's own groups go
        dist.destroy_process_group()     # what vLLM's shutdown calls last
    assert dist.is_initialized()
    assert sub not in dist.distributed_c10d._world.pg_map and dist.group.WORLD in dist.distributed_c10d._world.pg_map
    t = torch.ones(1)
    dist.all_reduce(t)  # still usable
    assert t.item() == 1


def test_without_keep_the_shutdown_destroys_the_group(one_rank_group):
    with keep_default_process_group(False):
        dist.destroy_process_group()
    assert not dist.is_initialized()


def test_the_guard_is_undone_after_an_exception():
    original = dist.destroy_process_group
    with pytest.raises(RuntimeError):
        with keep_default_process_group(True):
            raise RuntimeError("shutdown failed")
    assert dist.destroy_process_group is original

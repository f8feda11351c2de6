"""The pure parts of `--nproc` (tasks/generation/parallel.py): the split, the workers' environments, the
per-problem seed rule. Fast; the worker processes themselves are in tests/evaluation/test_nproc.py."""
import pytest

from tasks.generation.parallel import nproc_problem, shard_ranges, worker_envs
from tasks.generation.sampling import problem_seed, problem_seeds


@pytest.mark.parametrize("n, nproc, block", [(80, 2, 16), (80, 3, 16), (7, 3, 1), (10, 4, 3), (5, 8, 1),
                                             (3, 2, 16), (0, 2, 4), (64, 4, 16), (65, 4, 16)])
def test_shards_cover_in_order_at_block_boundaries(n, nproc, block):
    ranges = shard_ranges(n, nproc, block)
    assert [i for r in ranges for i in r] == list(range(n))  # every item once, in order
    assert all(len(r) > 0 for r in ranges) and len(ranges) <= nproc
    assert all(r.start % block == 0 for r in ranges)  # each shard starts where a batch of the whole starts
    blocks = [-(-len(r) // block) for r in ranges]
    assert max(blocks, default=0) - min(blocks, default=0) <= 1  # as even as whole blocks allow
    assert len(ranges) == min(nproc, -(-n // block))  # as many workers as there are blocks to give


def test_shard_examples():
    assert shard_ranges(80, 2, 16) == [range(0, 48), range(48, 80)]
    assert shard_ranges(10, 3, 1) == [range(0, 4), range(4, 7), range(7, 10)]
    assert shard_ranges(3, 2, 16) == [range(0, 3)]  # one batch: one worker
    with pytest.raises(ValueError):
        shard_ranges(4, 0)


def test_worker_envs_gpu_and_cpu():
    assert worker_envs(2, ["3", "5", "7"], cores=16) == [{"CUDA_VISIBLE_DEVICES": "3"}, {"CUDA_VISIBLE_DEVICES": "5"}]
    with pytest.raises(ValueError, match="nproc 3 needs one GPU per process, but 2 are visible"):
        worker_envs(3, ["0", "1"], cores=16)
    assert worker_envs(3, [], cores=16) == [{"OMP_NUM_THREADS": "5", "MKL_NUM_THREADS": "5",  # 16 // 3
                                             "KLEAR_TORCH_THREADS": "5"}] * 3
    assert worker_envs(4, [], cores=2)[0]["OMP_NUM_THREADS"] == "1"  # never below one thread
    assert worker_envs(2, [], cores=16, most=1)[0]["KLEAR_TORCH_THREADS"] == "1"  # never above the user's count
    assert worker_envs(2, [], cores=16, most=12)[0]["KLEAR_TORCH_THREADS"] == "8"


def test_nproc_problem():
    assert nproc_problem(1) is None and nproc_problem(2) is None  # this machine has no GPU: plain processes
    assert nproc_problem(0) == "must be at least 1 (got 0)"
    assert nproc_problem(-3) == "must be at least 1 (got -3)"


def test_problem_seed_rule():
    """sha256(f"{seed}:{id}")'s first 8 bytes, big-endian, >> 2: a 62-bit seed of the problem alone."""
    import hashlib

    want = int.from_bytes(hashlib.sha256(b"0:m-abc").digest()[:8], "big") >> 2
    assert problem_seed(0, "m-abc") == want < 2**62
    assert problem_seed(0, "m-abc") != problem_seed(1, "m-abc") != problem_seed(1, "m-abd")
    rows = [{"id": "a"}, {"id": "b"}, {"id": "a"}]
    assert problem_seeds(5, rows) == [problem_seed(5, "a"), problem_seed(5, "b"), problem_seed(5, "a")]

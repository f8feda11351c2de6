import pytest
import torch

from tasks.training.advantages import estimate_advantages, zero_variance_groups


def test_group_normalised():
    r = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    g = [0, 0, 0, 0, 1, 1]
    a = estimate_advantages("grpo", r, g)
    grp = torch.tensor(r[:4])
    assert a[:4].tolist() == pytest.approx(((grp - grp.mean()) / (grp.std() + 1e-6)).tolist(), abs=1e-5)
    assert a[4:].tolist() == [0.0, 0.0]


def test_drgrpo_skips_std():
    assert estimate_advantages("drgrpo", [1.0, 0.0], [3, 3]).tolist() == [0.5, -0.5]


def test_zero_variance_groups_and_unknown():
    assert zero_variance_groups([1, 1, 0, 1, 0, 0], [0, 0, 1, 1, 2, 2]) == {0, 2}
    with pytest.raises(ValueError, match="known: drgrpo, grpo"):
        estimate_advantages("ppo", [1.0], [0])

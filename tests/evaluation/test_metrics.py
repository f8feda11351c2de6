import random
from itertools import combinations

import pytest

from tasks.evaluation.metrics import avg_at_k, mean_pass_at_k, pass_at_k


def test_pass_at_k_matches_brute_force_over_subsets():
    outcomes = [True, False, False, True, False]
    for k in range(1, 6):
        subsets = list(combinations(outcomes, k))
        brute = sum(any(s) for s in subsets) / len(subsets)
        assert pass_at_k(5, 2, k) == pytest.approx(brute)


def test_edges():
    assert pass_at_k(4, 0, 2) == 0.0 and pass_at_k(4, 4, 1) == 1.0 and pass_at_k(4, 3, 2) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_avg_at_k_is_pass_at_1():
    rng = random.Random(0)
    correct = [[rng.random() < 0.3 for _ in range(8)] for _ in range(20)]
    assert avg_at_k(correct) == pytest.approx(mean_pass_at_k(correct, 1))
    assert avg_at_k([[True, False], [True, True]]) == 0.75


def test_infra_samples_are_left_out_and_counted():
    from tasks.evaluation.metrics import infra_counts

    correct = [[True, None], [False, True], [None, None]]
    assert avg_at_k(correct) == pytest.approx(0.75)  # 1/1 and 1/2; the all-infra problem is left out
    assert mean_pass_at_k(correct, 2) == pytest.approx(1.0)  # [True] scored pass@1 with one graded sample
    assert mean_pass_at_k([[False, None, True, False]], 2) == pytest.approx(pass_at_k(3, 1, 2))
    assert infra_counts(correct) == (3, 1)
    assert avg_at_k([[None]]) == 0.0 and infra_counts([[], [True]]) == (0, 0)

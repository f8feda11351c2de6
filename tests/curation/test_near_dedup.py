"""Near-duplicate detection (tasks/curation/near_dedup.py): one hostile behaviour per test."""
import numpy as np
import pytest

from tasks.curation.near_dedup import (NearDedupConfig, exact_jaccard, lsh_params, near_duplicate_of,
                                         same_numbers_rule)

INSTR = "Give the final answer in \\boxed{}."
LONG = ("A farmer plants trees in a rectangular grid with eleven rows and thirteen columns, then removes every "
        "tree that lies on the boundary of the grid and replants half of the removed trees along a diagonal "
        "path. How many trees are standing in the field after the replanting is finished?")


def test_case_and_spacing_variants_are_duplicates():
    texts = [LONG, "  " + LONG.upper().replace(" ", "   "), LONG.replace(" ", "\t")]
    assert near_duplicate_of(texts).tolist() == [-1, 0, 0]


def test_short_prefix_or_suffix_on_a_long_problem():
    texts = [f"{LONG} {INSTR}", f"Warm-up: {LONG} {INSTR}", f"{LONG} Explain briefly. {INSTR}", "unrelated row"]
    assert near_duplicate_of(texts).tolist() == [-1, 0, 0, -1]


def test_pair_just_above_threshold_is_found_for_almost_every_seed():
    # Jaccard 0.83: LSH makes it a candidate with P = 0.945 (b=14, r=9); once a candidate, the exact
    # Jaccard settles it, so signature noise (sd 0.034) does not drop it further
    texts = [f"{LONG} {INSTR}", f"{LONG} Explain briefly. {INSTR}"]
    found = sum(near_duplicate_of(texts, NearDedupConfig(seed=s))[1] == 0 for s in range(40))
    assert found >= 36


def test_exact_jaccard_matches_python_sets():
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 30, rng.integers(0, 25)).astype(np.uint64) << np.uint64(40) for _ in range(50)]
    off = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    a, b = rng.integers(0, 50, 200), rng.integers(0, 50, 200)
    got = exact_jaccard(np.concatenate(docs), off, a, b)
    sets = [set(d.tolist()) for d in docs]
    want = [len(sets[i] & sets[j]) / len(sets[i] | sets[j]) if sets[i] | sets[j] else 1.0 for i, j in zip(a, b)]
    assert np.allclose(got, want)


def test_different_equations_stay_distinct():
    texts = [f"Solve 3x+5=11 for x. {INSTR}", f"Solve 7x+2=9 for x. {INSTR}"]
    assert near_duplicate_of(texts).tolist() == [-1, -1]


def test_full_width_variant_is_a_duplicate():
    texts = ["Solve 3x+5=11 for x and report the value of x squared",
             "Solve ３ｘ＋５＝１１ for x and report the value of x squared"]
    assert near_duplicate_of(texts).tolist() == [-1, 0]


def test_big_identical_cluster_is_linear_and_keeps_the_first():
    same = [f"{LONG} variant"] * 4000
    others = [f"problem {i}: add {i} and {i * 7 + 3}, then multiply the sum by {i % 13}" for i in range(2000)]
    dup = near_duplicate_of(others[:1] + same + others[1:])
    assert dup[0] == -1 and dup[1] == -1 and (dup[2:4001] == 1).all() and (dup[4001:] == -1).all()


def test_transitive_cluster_points_at_earliest_row():
    base = LONG.split()
    a = " ".join(base)
    b = " ".join(base[:-1] + ["finished?!"])
    c = " ".join(base[:-2] + ["done", "finished?!"])
    assert near_duplicate_of([c, b, a]).tolist() == [-1, 0, 0]


def test_empty_rows_are_never_near_duplicates():
    assert near_duplicate_of(["", "", "  ", LONG]).tolist() == [-1, -1, -1, -1]


def test_empty_and_single_input():
    assert near_duplicate_of([]).tolist() == [] and near_duplicate_of(["x"]).tolist() == [-1]
    assert near_duplicate_of([]).dtype == np.int64


def test_band_choice_favours_recall():
    b, r = lsh_params(0.8, 128)
    assert b * r <= 128 and 1 - (1 - 0.85**r) ** b > 0.97


def _long_problem(words: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    vocab = [f"w{a}{b}{c}" for a in "abcdefgh" for b in "abcdefgh" for c in "abcdefgh"]
    body = " ".join(vocab[i] for i in rng.integers(0, len(vocab), words))
    return f"A farmer has 17 sheep and 23 goats. {body} How many legs are there?"


@pytest.mark.parametrize("words", [20, 60, 150, 400])
def test_a_changed_number_is_a_different_problem_at_any_length(words):
    base = _long_problem(words)
    assert near_duplicate_of([base, base.replace("17", "19")]).tolist() == [-1, -1]
    assert near_duplicate_of([base, base.replace("23 goats", "23 goats and 4 hens")]).tolist() == [-1, -1]


@pytest.mark.parametrize("words", [20, 60, 150, 400])
def test_lead_in_tail_and_spacing_around_the_same_numbers_still_merge(words):
    base = _long_problem(words)
    variants = ["Problem 7: " + base, base + " (5 points)", "  ".join(base.split()), "Solve: " + base]
    assert near_duplicate_of([base, *variants]).tolist() == [-1, 0, 0, 0, 0]


@pytest.mark.parametrize("a, b, same", [
    ("x = 1,000 and y = 3.50", "x = 1000 and y = 3.5", True),
    ("find 3x+5=11", "find 3x+5=12", False),
    ("add 2 then 3", "add 3 then 2", False),                 # order matters
    ("Task 12. add 2 then 3", "add 2 then 3", True),         # a lead-in's own number
    ("add 2 then 3 and 4 more in the middle of things", "add 2 then 3 more in the middle of things", False),
])
def test_same_numbers_rule(a, b, same):
    assert same_numbers_rule(a, b) is same


def test_the_numbers_rule_can_be_turned_off():
    base = _long_problem(150)
    off = NearDedupConfig(numbers_must_match=False)
    assert near_duplicate_of([base, base.replace("17", "19")], off).tolist() == [-1, 0]

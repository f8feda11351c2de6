"""Code-aware decontamination (tasks/curation/code_overlap.py): one hostile behaviour per test."""
import json

import numpy as np
import pytest

from tasks.curation.code_overlap import (BenchmarkTests, CaseOverlapConfig, case_hashes, find_case_overlap,
                                         normalised_cases)
from tasks.curation.config import CurateConfig


def io(*cases):
    return {"inputs": [a for a, _ in cases], "outputs": [b for _, b in cases]}


SUM = io(("3 4\n", "7\n"), ("10 20\n", "30\n"), ("-5 5\n", "0\n"), ("100 1\n", "101\n"))
REVERSE = io(("hello\n", "olleh\n"), ("abc\n", "cba\n"), ("racecar\n", "racecar\n"))
TRIVIAL = [("1\n", "1\n"), ("", "0\n")]


def one(row_tests, bench_tests, **cfg):
    return find_case_overlap([row_tests], {"bench": bench_tests}, CaseOverlapConfig(**cfg))[0]


def test_same_tests_are_contaminated_and_the_problem_is_named():
    hit = one(SUM, [REVERSE, SUM])
    assert (hit.benchmark, hit.problem, hit.shared, hit.of) == ("bench", 1, 4, 4)


def test_different_tests_are_kept():
    assert one(io(("abba\n", "YES\n"), ("abc\n", "NO\n"), ("xyzzyx\n", "YES\n")), [REVERSE, SUM]) is None


def test_whitespace_and_trailing_newlines_do_not_hide_a_copy():
    copy = {"inputs": ["3  4", "10 20\r\n", ["-5 5"], "\n100\t1 \n\n"], "outputs": ["7", "30 \n", "0\r\n", "101"]}
    assert one(copy, [SUM]).shared == 4


def test_trivial_cases_in_many_benchmark_problems_never_contaminate_alone():
    bench = [io(*TRIVIAL, ("a\n", "b\n"), ("c\n", "d\n")), io(*TRIVIAL, ("e\n", "f\n")), io(*TRIVIAL, ("g\n", "h\n"))]
    row = io(*TRIVIAL, ("x\n", "y\n"), ("z\n", "w\n"))  # 2 of min(4, 4) shared: 50% were they counted
    assert one(row, bench) is None
    assert one(row, bench, bench_min_docs=4) is not None


def test_a_case_in_two_benchmark_problems_is_not_yet_trivial():
    """The same problem may sit in two benchmarks (or two versions of one): its cases stay evidence."""
    hit = find_case_overlap([SUM], {"v1": [SUM], "v2": [io(*[(a, b) for a, b in zip(SUM["inputs"], SUM["outputs"])],
                                                          ("7 7\n", "14\n"))]})[0]
    assert (hit.benchmark, hit.shared) == ("v1", 4)


def test_a_case_in_most_training_rows_is_trivial():
    bench = [io(("5\n", "5\n"), ("6\n", "7\n"), ("8\n", "9\n"))]
    common = [io(("5\n", "5\n"), (f"{i}x\n", f"{i}y\n"), (f"{i}z\n", "w\n")) for i in range(10)]
    row = io(("5\n", "5\n"), ("6\n", "7\n"), ("q\n", "r\n"))  # shares 2 of 3, one of them in every row
    assert find_case_overlap([row], {"b": bench})[0] is not None
    assert find_case_overlap([row] + common, {"b": bench})[0] is None


def test_fraction_exactly_at_the_threshold_is_contaminated():
    row = io(("3 4\n", "7\n"), ("10 20\n", "30\n"), ("8 8\n", "16\n"), ("9 9\n", "18\n"))  # 2 of min(4, 4)
    assert one(row, [SUM], threshold=0.5).shared == 2


def test_fraction_just_below_the_threshold_is_kept():
    row = io(("3 4\n", "7\n"), ("10 20\n", "30\n"), ("8 8\n", "16\n"), ("9 9\n", "18\n"))
    assert one(row, [SUM], threshold=0.51) is None


def test_one_shared_case_is_never_enough():
    assert one(io(("3 4\n", "7\n")), [SUM]) is None  # 1 of min(1, 4) = 100%, but a single case


def test_a_copy_with_only_some_of_the_benchmark_tests_is_contaminated():
    public = io(("3 4\n", "7\n"), ("10 20\n", "30\n"))
    many = io(*[(f"{i} {i}\n", f"{2 * i}\n") for i in range(40)], ("3 4\n", "7\n"), ("10 20\n", "30\n"))
    assert one(public, [many]).of == 2


def test_a_copy_with_extra_tests_of_its_own_is_contaminated():
    extra = io(*zip(SUM["inputs"], SUM["outputs"]), *[(f"{i} 0\n", f"{i}\n") for i in range(2, 40)])
    assert one(extra, [SUM]).of == 4


def test_call_based_matches_assert_style_with_a_renamed_function():
    asserts = {"assert_code": "assert gcd_of(12, 18) == 6\nassert 1 == gcd_of(7, 13)\nassert gcd_of(100, 75) == 25"}
    row = {"fn_name": "greatest_common", "inputs": [[12, 18], [7, 13], [100, 75]], "outputs": [6, 1, 25.0]}
    assert one(row, [asserts]).shared == 3


def test_livecodebench_functional_text_matches_argument_lists():
    lcb = {"fn_name": "f", "inputs": ["[1, 2]\n3", "[]\n0"], "outputs": ["[1, 2, 3]", "[0]"]}
    row = {"fn_name": "g", "inputs": [[[1, 2], 3], [[], 0]], "outputs": [[1, 2, 3], [0]]}
    assert one(row, [lcb]).shared == 2


def test_asserts_the_parser_refuses_are_still_compared_on_the_benchmark_side():
    bench = {"assert_code": "expected = 6\nassert f(12, 18) == expected\nassert f(7, 13) == 1\nassert f(9, 3) == 3"}
    row = {"assert_code": "assert f(7, 13) == 1\nassert f(9, 3) == 3"}
    assert one(row, [bench]).shared == 2


def test_example_is_one_short_line():
    big = "9 " * 5000 + "\n"
    bench = io((big, "45000\n"), ("1 2\n", "3\n"), ("2 2\n", "4\n"))
    hit = one(io((big.replace(" ", "\n"), "45000"), ("1 2", "3")), [bench])
    assert "\n" not in hit.example and len(hit.example) <= 110 and hit.example.startswith("input '9 9 9")


def test_rows_and_benchmarks_without_usable_tests_are_clean():
    rows = [None, "", "{not json", {"inputs": [], "outputs": []}, SUM]
    assert find_case_overlap(rows, {"b": [None, "{bad", SUM]})[:4] == [None] * 4
    assert find_case_overlap([SUM], {"b": [None, None]}) == [None]
    assert find_case_overlap([], {"b": [SUM]}) == []


def test_the_best_match_has_the_highest_fraction():
    half = io(("3 4\n", "7\n"), ("10 20\n", "30\n"), ("5 5\n", "10\n"), ("6 6\n", "12\n"))
    hit = find_case_overlap([SUM], {"loose": [half], "exact": [SUM]})[0]
    assert (hit.benchmark, hit.shared, hit.of) == ("exact", 4, 4)


def test_json_text_and_dict_give_the_same_cases():
    assert normalised_cases(json.dumps(SUM)) == normalised_cases(SUM)


def test_chunked_use_gives_the_one_shot_answer():
    """The out-of-core recipe: case hashes per chunk, training frequencies summed, then match per chunk."""
    bench_tests = {"b": [SUM, REVERSE]}
    rows = [REVERSE, None, io(("x\n", "y\n"), ("z\n", "w\n")), SUM]
    bench = BenchmarkTests(bench_tests)
    chunks = [[case_hashes(t) for t in rows[:2]], [case_hashes(t) for t in rows[2:]]]
    df = sum(bench.row_frequency(c) for c in chunks)
    trivial = bench.trivial(df, sum(len(h) > 0 for c in chunks for h in c))
    chunked = [m for c in chunks for m in bench.match(c, trivial)]
    oneshot = find_case_overlap(rows, bench_tests)
    assert [(m.benchmark, m.problem) if m else None for m in chunked] == \
           [(m.benchmark, m.problem) if m else None for m in oneshot] == [("b", 1), None, None, ("b", 0)]


def test_case_hashes_are_distinct_and_sorted():
    h = case_hashes(io(("1 2\n", "3\n"), ("1  2", "3"), ("2 2\n", "4\n")))
    assert len(h) == 2 and h.dtype == np.uint64 and (np.diff(h.astype(object)) > 0).all()


def test_curate_config_default_is_the_module_default():
    assert CurateConfig(sources=[{"name": "a", "path": "a.jsonl"}]).test_overlap == CaseOverlapConfig().threshold


@pytest.mark.parametrize("bad", [0, 1.5])
def test_curate_config_rejects_a_threshold_outside_0_1(bad):
    with pytest.raises(ValueError, match="test_overlap"):
        CurateConfig(sources=[{"name": "a", "path": "a.jsonl"}], test_overlap=bad)


def test_a_value_nested_too_deep_to_normalise_is_no_case_and_no_crash():
    deep = 0
    for _ in range(5000):
        deep = [deep]
    row = {"fn_name": "f", "inputs": [[1], [2]], "outputs": [deep, 3]}
    assert normalised_cases(row) == [] and one(row, [SUM]) is None


def test_apps_wrapped_call_outputs_match_bare_return_values():
    """APPS/TACO wrap each expected value in a one-element list and the judge (unwrap_outputs) accepts the
    bare value, so [[3], [12], [27]] and [3, 12, 27] are one set of cases."""
    bench = {"fn_name": "triple", "inputs": [[1], [4], [9]], "outputs": [3, 12, 27]}
    row = {"fn_name": "times_three", "inputs": [[1], [4], [9]], "outputs": [[3], [12], [27]]}
    assert one(row, [bench]).shared == 3


def test_a_wrapped_list_return_value_matches_the_bare_list():
    """A function returning a list, one side APPS-wrapped: [[1]] vs [1] and [[1, 2]] vs [1, 2]."""
    bench = {"fn_name": "f", "inputs": [[1], [2]], "outputs": [[1], [1, 2]]}
    row = {"fn_name": "g", "inputs": [[1], [2]], "outputs": [[[1]], [[1, 2]]]}
    assert one(row, [bench]).shared == 2


def test_three_versions_of_one_benchmark_still_catch_an_exact_copy():
    """HumanEval, HumanEval+ and a third version: the same problems, different test sets. A case of theirs
    sits in 3 benchmark problems but in one group of versions, so it stays evidence."""
    cases = list(zip(SUM["inputs"], SUM["outputs"]))
    rev = list(zip(REVERSE["inputs"], REVERSE["outputs"]))
    versions = {"he": [SUM, REVERSE],
                "he+": [io(*cases, *[(f"{i} {i}\n", f"{2 * i}\n") for i in range(50, 60)]), io(*rev, ("ab\n", "ba\n"))],
                "he3": [io(*cases, ("7 7\n", "14\n")), io(*rev, ("xy\n", "yx\n"))]}
    hit = find_case_overlap([SUM], versions)[0]
    assert (hit.benchmark, hit.problem, hit.shared, hit.of) == ("he", 0, 4, 4)


def test_cases_in_two_problems_of_one_benchmark_do_not_make_versions():
    """b1 and b2 are two problems of one benchmark sharing TRIVIAL: versions of one problem hold a case once
    per benchmark, so TRIVIAL is no evidence that a1 is a version of either, and in 3 groups it stays
    trivial (2 of min(4, 3) shared were it evidence)."""
    bench = {"a": [io(*TRIVIAL, ("a\n", "b\n"), ("c\n", "d\n"))],
             "b": [io(*TRIVIAL, ("e\n", "f\n")), io(*TRIVIAL, ("g\n", "h\n"))]}
    row = io(*TRIVIAL, ("x\n", "y\n"), ("z\n", "w\n"))
    assert find_case_overlap([row], bench) == [None]


def test_a_group_of_versions_never_takes_two_problems_of_one_benchmark():
    """b1 holds the cases of a1 and of a2 (two problems of benchmark a): it joins one of them, never both."""
    a1, a2 = io(("1 1\n", "2\n"), ("2 2\n", "4\n"), ("3 3\n", "6\n")), io(("ab\n", "ba\n"), ("cd\n", "dc\n"))
    b1 = io(*zip(a1["inputs"], a1["outputs"]), *zip(a2["inputs"], a2["outputs"]))
    group = BenchmarkTests({"a": [a1, a2], "b": [b1]}).group
    assert group[0] != group[1] and group[2] == group[0]


def test_copies_of_one_benchmark_problem_in_a_small_dataset_do_not_hide_each_other():
    """Five reworded copies among 20 rows with tests would reach train_min_docs (5) were they counted
    five times; rows with identical case sets count once."""
    others = [io((f"{i}a\n", f"{i}b\n"), (f"{i}c\n", f"{i}d\n")) for i in range(15)]
    hits = find_case_overlap([SUM] * 5 + others, {"b": [SUM, REVERSE]})
    assert [h is not None for h in hits] == [True] * 5 + [False] * 15


def test_copies_in_different_chunks_count_once_with_one_seen_set():
    """Out of core: one `seen` set passed to every chunk's row_frequency counts a case set once overall."""
    bench = BenchmarkTests({"b": [SUM, REVERSE]})
    seen: set = set()
    df = sum(bench.row_frequency(chunk, seen=seen) for chunk in ([case_hashes(SUM)] * 3, [case_hashes(SUM)] * 2))
    assert df.max() == 1

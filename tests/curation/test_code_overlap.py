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

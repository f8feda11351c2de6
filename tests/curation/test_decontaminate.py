"""Benchmark decontamination (tasks/curation/decontaminate.py): one hostile behaviour per test."""
from tasks.curation.decontaminate import DecontamConfig, find_contamination
from tests.curation.fixtures import BENCH, INSTR

BENCH_I = {"aime": [f"{b} {INSTR}" for b in BENCH]}


def test_benchmark_after_a_different_lead_in_is_contaminated():
    hits = find_contamination([f"Here is a contest question. {BENCH[1]}"], {"bench": BENCH})
    assert hits[0] is not None and hits[0][0] == "bench"


def test_matched_ngram_is_returned_as_text():
    hits = find_contamination([f"Warm up first. {BENCH[0]}"], {"b": BENCH})
    assert hits == [("b", "let a and b be positive integers such that")]


def test_shared_short_phrase_is_kept():
    rows = ["Quick one: find the number of ordered pairs of primes below ten.",
            "Two marbles are drawn without replacement from an urn of ten balls."]
    assert find_contamination(rows, {"b": BENCH}) == [None, None]


def test_instruction_in_every_prompt_is_not_contamination_even_straddling():
    rows = [f"Solve 3x+5=11 for x. {INSTR}",
            f"Count the pairs of sets that satisfy these conditions. {INSTR}",  # 3 words + instruction = 9
            f"{INSTR} Then find the number of ordered pairs of colours."]
    assert find_contamination(rows, BENCH_I) == [None, None, None]


def test_instruction_detected_from_training_rows_when_benchmark_has_one_problem():
    rows = [f"Problem {i}: count the apples that satisfy these conditions. {INSTR}" for i in range(12)]
    assert find_contamination(rows, {"one": [f"{BENCH[0]} {INSTR}"]}) == [None] * 12


def test_benchmark_copied_into_three_rows_of_thirty_is_not_boilerplate():
    rows = [f"Lead-in number {i}. {BENCH[2]} {INSTR}" if i % 10 == 3 else f"Row {i} asks about {i} apples. {INSTR}"
            for i in range(30)]
    hits = find_contamination(rows, BENCH_I)
    assert [i for i, h in enumerate(hits) if h] == [3, 13, 23]


def test_full_width_and_case_variants_still_match():
    row = "ＬＥＴ A AND B BE POSITIVE INTEGERS SUCH THAT the least common multiple of a and b is ３６０"
    assert find_contamination([row], {"b": BENCH})[0] is not None


def test_first_benchmark_in_order_is_named():
    hits = find_contamination([BENCH[2]], {"first": [BENCH[2]], "second": [BENCH[2], BENCH[0]]})
    assert hits[0][0] == "first"


def test_custom_n_changes_what_counts():
    row = "the least common multiple of a and b is"  # 9 words shared with BENCH[0]
    assert find_contamination([row], {"b": BENCH}, DecontamConfig(n=9))[0] is not None
    assert find_contamination([row], {"b": BENCH}, DecontamConfig(n=10))[0] is None


def test_empty_inputs():
    assert find_contamination([], {"b": BENCH}) == []
    assert find_contamination(["", "x"], {"b": BENCH}) == [None, None]
    assert find_contamination(["anything at all"], {}) == [None]


TEMPLATED = {"arith": [f"Let the first quantity be equal to {a} and let the second quantity be equal to {b}, then "
                       f"compute the sum of both quantities." for a, b in [(12, 7), (30, 5), (8, 41), (16, 9),
                                                                           (23, 14), (5, 5), (61, 2), (19, 33)]]}


def test_a_verbatim_copy_of_a_templated_benchmark_problem_is_contaminated():
    """Problems that differ only in their numbers: every shared phrase is boilerplate, so no 9-gram is left,
    yet a copy (up to case, punctuation and spacing) is still a copy."""
    copy = TEMPLATED["arith"][2].upper().replace("?", " ?")
    hits = find_contamination([copy], TEMPLATED)
    assert hits[0] is not None and hits[0][0] == "arith" and hits[0][1].startswith("let the first quantity")


def test_a_template_mate_with_other_numbers_is_kept():
    mate = "Let the first quantity be equal to 77 and let the second quantity be equal to 3, then compute the sum of both quantities."
    assert find_contamination([mate, TEMPLATED["arith"][0]], TEMPLATED)[0] is None


def test_a_short_benchmark_problem_copied_whole_is_contaminated_but_not_inside_a_longer_row():
    bench = {"short": ["What is 2 + 2?"]}
    assert find_contamination(["what is 2+2"], bench)[0] == ("short", "what is 2 2")
    assert find_contamination(["Tell me what is 2 + 2? Then what is 3 + 3?"], bench) == [None]

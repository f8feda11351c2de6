import os
import subprocess
import sys
import textwrap
import threading
from fractions import Fraction
from pathlib import Path

import pytest

from tasks.grading.grade import Outcome
from tasks.grading.math_grader import MathGrader, final_text
from tasks.grading.rewards import RewardConfig, reward_from_grade
from tasks.grading.timeouts import TimedOut, WorkerFault

ROOT = Path(__file__).resolve().parents[2]
TOWER = "\\boxed{3^{3^{3^{3}}}}"
FACTORIAL = "\\boxed{(10^{10})!}"
NESTED = "\\boxed{" + "\\frac{1}{1+" * 200 + "2" + "}" * 200 + "}"


def _one(g, response, answer):
    """One grade through the Grader protocol (grade_batch)."""
    return g.grade_batch([(response, {"answer": answer})])[0]


@pytest.fixture(scope="module")
def grader():
    g = MathGrader(timeout=20)
    yield g
    g.close()


@pytest.fixture(scope="module")
def quick():
    """A grader with a short deadline, for answers that make math-verify hang."""
    g = MathGrader(timeout=1)
    yield g
    g.close()


def test_final_text_after_last_think_close():
    assert final_text("<think>\\boxed{1}</think> so \\boxed{2}") == " so \\boxed{2}"
    assert final_text("no think \\boxed{3}") == "no think \\boxed{3}"


@pytest.mark.parametrize("response, answer, ok", [
    ("<think>37+48=85, 85-19=66</think>The answer is \\boxed{66}.", "66", True),
    ("<think>\\boxed{66}</think>The answer is \\boxed{65}.", "66", False),  # only the final text counts
    ("<think>x</think>\\boxed{\\frac{1}{2}}", "0.5", True),
    ("<think>x</think>no answer here", "3", False),
])
def test_math_grades(grader, response, answer, ok):
    assert grader.grade(response, answer).correct is ok


def test_grading_works_off_the_main_thread(grader):
    out = []
    t = threading.Thread(target=lambda: out.append(grader.grade("</think>\\boxed{4}", "4").correct))
    t.start(); t.join(60)
    assert out == [True]


# 1. an answer the grader cannot finish is wrong; only an unusable reference is infra

@pytest.mark.parametrize("answer", [TOWER, FACTORIAL], ids=["tower", "factorial"])
def test_an_answer_the_grader_cannot_finish_is_wrong(quick, answer):
    g = _one(quick, f"<think>t</think>{answer}", "3")
    assert (g.outcome, g.verdict) == (Outcome.WRONG, "grader_timeout")
    assert reward_from_grade("math", f"<think>t</think>{answer}", g, RewardConfig()) == -1.0


def test_an_unfinished_answer_still_gets_the_format_penalty(quick):
    g = _one(quick, TOWER, "3")
    assert reward_from_grade("math", TOWER, g, RewardConfig()) == RewardConfig().missing_think_open


def test_a_deeply_nested_answer_is_graded_not_left_out(quick):
    g = _one(quick, f"</think>{NESTED}", "3")
    assert g.outcome is Outcome.WRONG


def test_an_unparsable_reference_is_infra(grader):
    g = _one(grader, "</think>\\boxed{1}", "\\frac{1}{")
    assert (g.outcome, g.verdict) == (Outcome.INFRA, "invalid_reference")
    assert reward_from_grade("math", "<think></think>\\boxed{1}", g, RewardConfig()) is None


def test_a_hang_costs_only_its_own_item(quick):
    got = quick.grade_batch([(f"</think>{TOWER}", {"answer": "3"}), ("</think>\\boxed{3}", {"answer": "3"}),
                             ("</think>\\boxed{4}", {"answer": "3"})])
    assert [(x.outcome, x.verdict) for x in got] == [(Outcome.WRONG, "grader_timeout"), (Outcome.CORRECT, ""),
                                                     (Outcome.WRONG, "")]


class _ScriptedPool:
    """Stands in for the workers: runs the stream in this process, and runs past the deadline where the
    script says ("reference" or "answer" of an item whose answer is "hang")."""

    def __init__(self, hang_at: str):
        self.hang_at = hang_at

    def stream(self, fn, items, timeout):
        n = 0
        for answer, text in items:
            if answer == "hang" and self.hang_at == "reference":
                raise TimedOut("hung", n)
            yield "reference", n, True
            if answer == "hang":
                raise TimedOut("hung", n)
            yield "answer", n, "right" in text
            n += 1

    def close(self):
        pass


def test_a_reference_whose_parse_runs_past_the_deadline_is_infra():
    g = MathGrader(timeout=1)
    g._pool = _ScriptedPool("reference")
    got = g.grade_batch([("</think>right", {"answer": "hang"}), ("</think>right", {"answer": "1"})])
    assert [(x.outcome, x.verdict) for x in got] == [(Outcome.INFRA, "invalid_reference"), (Outcome.CORRECT, "")]
    again = _one(g, "</think>right", "hang")  # known invalid: not sent to a worker again
    assert (again.outcome, again.verdict) == (Outcome.INFRA, "invalid_reference")


def test_a_parsed_reference_pins_a_hang_on_the_answer():
    g = MathGrader(timeout=1)
    g._pool = _ScriptedPool("answer")
    got = g.grade_batch([("</think>right", {"answer": "hang"}), ("</think>right", {"answer": "1"})])
    assert [(x.outcome, x.verdict) for x in got] == [(Outcome.WRONG, "grader_timeout"), (Outcome.CORRECT, "")]


class _DyingPool:
    """The worker dies on the answer "crash" the first `deaths` times it meets it, and stalls on "stall"."""

    def __init__(self, deaths: int):
        self.deaths = deaths

    def stream(self, fn, items, timeout):
        for n, (answer, text) in enumerate(items):
            yield "reference", n, True
            if answer == "stall":
                raise WorkerFault("stalled", "no progress", n)
            if answer == "crash" and self.deaths > 0:
                self.deaths -= 1
                raise WorkerFault("died", "killed", n)
            yield "answer", n, "right" in text

    def close(self):
        pass


@pytest.mark.parametrize("deaths, expected", [(1, (Outcome.CORRECT, "")), (2, (Outcome.WRONG, "grader_crash"))])
def test_a_worker_death_is_retried_once_then_pinned_on_the_answer(deaths, expected):
    g = MathGrader(timeout=1)
    g._pool = _DyingPool(deaths)
    got = g.grade_batch([("</think>right", {"answer": "crash"}), ("</think>right", {"answer": "1"})])
    assert [(x.outcome, x.verdict) for x in got] == [expected, (Outcome.CORRECT, "")]


def test_a_stalled_worker_is_infra():
    g = MathGrader(timeout=1)
    g._pool = _DyingPool(0)
    got = g.grade_batch([("</think>right", {"answer": "stall"}), ("</think>nope", {"answer": "1"})])
    assert [(x.outcome, x.verdict) for x in got] == [(Outcome.INFRA, "grader_stalled"), (Outcome.WRONG, "")]


# 2. the deadline is the worker's CPU time, not wall time

def _harmonic(n: int) -> tuple[str, str]:
    s = sum(Fraction(1, k) for k in range(2, n))
    return f"\\frac{{{s.numerator}}}{{{s.denominator}}}", "\\boxed{" + "+".join(f"\\frac{{1}}{{{k}}}" for k in range(2, n)) + "}"


def test_an_honest_slow_verification_passes_on_a_loaded_machine():
    """~1.5 s of CPU on an idle core; 6+ busy loops leave the worker a fraction of a core, so a 3 s wall
    deadline failed it; a 3 s CPU deadline does not."""
    answer, text = _harmonic(800)
    g = MathGrader(timeout=3)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(min(48, max(6, 3 * len(os.sched_getaffinity(0)))))]
    try:
        got = _one(g, f"</think>{text}", answer)
    finally:
        for p in hogs:
            p.kill()
        for p in hogs:
            p.wait()
        g.close()
    assert (got.outcome, got.verdict) == (Outcome.CORRECT, "")


# 3. grading from a plain script

def test_grading_works_from_a_script_without_a_main_guard(tmp_path):
    script = tmp_path / "grade_it.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from tasks.grading.math_grader import MathGrader
        g = MathGrader(timeout=20)
        print("GRADE", g.grade_batch([("</think>\\\\boxed{{4}}", {{"answer": "4"}})])[0].outcome.value, flush=True)
        g.close()
    """))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "GRADE correct" in res.stdout, res.stdout + res.stderr


# 4. a relation counts only when it states the answer

@pytest.mark.parametrize("text, ok", [
    ("\\boxed{4 = 3}", False),          # false
    ("\\boxed{x = 4 = 3}", False),      # a chain whose parts disagree
    ("$x = 4 = 3$", False),
    ("x = 4 = 3", False),
    ("The answer is x = 4 = 3.", False),
    ("\\boxed{x = 3}", True),           # states the answer
    ("\\boxed{x = 2 + 1 = 3}", True),   # a chain that agrees
    ("So $y = 2$, hence \\boxed{3}.", True),
])
def test_a_relation_counts_only_when_it_states_the_answer(grader, text, ok):
    assert grader.grade(f"</think>{text}", "3").correct is ok


# 5. notations math-verify misreads, normalised on both sides

@pytest.mark.parametrize("text, answer, ok", [
    ("\\boxed{1\\,000}", "0", False),
    ("\\boxed{1 000}", "0", False),
    ("\\boxed{1\\,000}", "1000", True),
    ("\\boxed{1{,}000}", "1000", True),
    ("\\boxed{1,000}", "1000", True),
    ("\\boxed{1\u202f000\u202f000}", "1000000", True),
    ("\\boxed{1 000 000}", "1000000", True),
    ("\\boxed{1000000}", "1 000 000", True),
    ("\\boxed{１０００}", "1000", True),
    ("\\boxed{٣}", "3", True),
    ("\\boxed{3}", "٣", True),
    ("\\boxed{2\\mathrm{e}}", "2", False),
    ("\\boxed{2}", "2\\mathrm{e}", False),
    ("\\boxed{2\\mathrm{e}}", "2e", True),
    ("\\boxed{e}", "\\mathrm{e}", True),
    ("\\boxed{3.}", "3", True),
    ("\\boxed{0.\\overline{3}}", "\\frac{1}{3}", True),
    ("\\boxed{0.1\\overline{6}}", "\\frac{1}{6}", True),
    ("\\boxed{0.\\dot{3}}", "\\frac{1}{3}", True),
    ("\\boxed{0.\\overline{3}}", "0.3", False),
    ("\\boxed{x < 3}", "(-\\infty, 3)", True),
    ("\\boxed{(-\\infty, 3)}", "x < 3", True),
    ("\\boxed{x \\le 3}", "(-\\infty, 3]", True),
    ("\\boxed{x \\geq 3}", "[3, \\infty)", True),
    ("\\boxed{x \\le 3}", "(-\\infty, 3)", False),
])
def test_notations_are_normalised_before_math_verify(grader, text, answer, ok):
    assert grader.grade(f"</think>{text}", answer).correct is ok


# batching, registry

def test_registry_builds_math_grader_and_rejects_unknown():
    from tasks.grading.registry import make_grader

    g = make_grader("math", timeout=20)
    try:
        grades = g.grade_batch([("</think>\\boxed{7}", {"answer": "7"}), ("</think>\\boxed{8}", {"answer": 7}),
                                ("</think>\\boxed{8}", {})])
        assert [x.outcome for x in grades] == [Outcome.CORRECT, Outcome.WRONG, Outcome.INFRA]
        assert grades[2].verdict == "no_reference"
    finally:
        g.close()
    with pytest.raises(ValueError, match="no grader for domain 'poetry'"):
        make_grader("poetry")


@pytest.mark.parametrize("workers", [1, 2])
def test_batch_in_chunks_matches_one_by_one_and_keeps_order(workers):
    items = [(f"<think>t</think>The answer is \\boxed{{{i % 3}}}.", {"answer": str(i % 2)}) for i in range(7)]
    items.insert(3, ("\\boxed{1}", {"answer": None}))
    g = MathGrader(timeout=20, chunk=3, workers=workers)
    try:
        got = g.grade_batch(items)
        one_by_one = [g.grade(r, row["answer"]).correct for r, row in items if row["answer"] is not None]
    finally:
        g.close()
    assert [x.correct for x in got] == one_by_one[:3] + [False] + one_by_one[3:]
    assert got[3].outcome is Outcome.INFRA and got[3].verdict == "no_reference"
    assert [x.correct for x in got] == [True, True, False, False, False, False, False, True]


def test_references_are_checked_as_grading_reads_them(grader):
    assert grader.check_references(["12", "x^2+1", "\\frac{1}{", "", "1\\,000"]) == [
        None, None, "math-verify finds no mathematical expression in it",
        "math-verify finds no mathematical expression in it", None]

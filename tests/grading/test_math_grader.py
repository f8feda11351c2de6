import threading
import time

import pytest

from tasks.grading.grade import Outcome
from tasks.grading.math_grader import MathGrader, final_text
from tasks.grading.timeouts import ProcessTimeoutPool, TimedOut


@pytest.fixture(scope="module")
def grader():
    g = MathGrader(timeout=20)
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


def _sleep(s):
    time.sleep(s)
    return s


def test_timeout_kills_and_pool_recovers():
    pool = ProcessTimeoutPool()
    try:
        with pytest.raises(TimedOut):
            pool.call(_sleep, 30, timeout=1)
        assert pool.call(_sleep, 0, timeout=30) == 0
    finally:
        pool.close()


def test_pool_startup_is_not_part_of_the_deadline():
    # a fresh pool spawns Python and imports this module (pytest, math-verify): longer than 0.2 s, which
    # under load used to time out every call and respawn the pool; only the call itself is timed now
    pool = ProcessTimeoutPool()
    try:
        assert pool.call(_sleep, 0, timeout=0.2) == 0
    finally:
        pool.close()


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


def test_batch_in_chunks_matches_one_by_one_and_keeps_order():
    items = [(f"<think>t</think>The answer is \\boxed{{{i % 3}}}.", {"answer": str(i % 2)}) for i in range(7)]
    items.insert(3, ("\\boxed{1}", {"answer": None}))
    g = MathGrader(timeout=20, chunk=3)
    try:
        got = g.grade_batch(items)
        one_by_one = [g.grade(r, row["answer"]).correct for r, row in items if row["answer"] is not None]
    finally:
        g.close()
    assert [x.correct for x in got] == one_by_one[:3] + [False] + one_by_one[3:]
    assert got[3].outcome is Outcome.INFRA and got[3].verdict == "no_reference"
    assert [x.correct for x in got] == [True, True, False, False, False, False, False, True]


def test_a_chunk_past_its_deadline_is_regraded_item_by_item():
    # a deadline no chunk can meet (negative) forces the one-by-one path; results are the same
    items = [("\\boxed{2}", {"answer": "2"}), ("\\boxed{3}", {"answer": "2"})]
    g = MathGrader(timeout=20, chunk=2, chunk_item_s=-10.0)
    try:
        assert [x.correct for x in g.grade_batch(items)] == [True, False]
    finally:
        g.close()


class _HangingPool:
    """Stands in for the grading process: any call whose text says "hang" misses its deadline."""
    def call(self, fn, *args, timeout):
        if "hang" in repr(args):
            raise TimedOut("hung")
        return fn(*args) if fn.__name__ == "_verify_many" else True

    def close(self):
        pass


def test_a_grader_hang_is_infra_not_wrong():
    """math-verify past its deadline says nothing about the answer: INFRA "grader_timeout", reward None;
    the rest of its chunk is regraded one by one and keeps its grade."""
    from tasks.grading.rewards import RewardConfig, reward_from_grade

    g = MathGrader(timeout=1, chunk=2)
    g._pool = _HangingPool()
    got = g.grade_batch([("<think></think>hang", {"answer": "1"}), ("<think></think>\\boxed{1}", {"answer": "1"})])
    assert [(x.outcome, x.verdict) for x in got] == [(Outcome.INFRA, "grader_timeout"), (Outcome.CORRECT, "")]
    assert reward_from_grade("math", "<think></think>hang", got[0], RewardConfig()) is None

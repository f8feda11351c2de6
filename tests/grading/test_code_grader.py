import pytest

from tasks.grading.code_extract import extract_code
from tasks.grading.code_grader import CodeGrader, grade_from_result
from tasks.grading.grade import Outcome
from tasks.grading.rewards import RewardConfig, reward_from_grade

TESTS = {"inputs": [f"{i}\n" for i in range(40)], "outputs": [f"{2 * i}\n" for i in range(40)]}
PROGRAM = "<think>x</think>```python\nprint(int(input()) * 2)\n```"


def test_extract_last_block_after_think():
    r = "<think>```python\nprint('draft')\n```</think>\nfinal:\n```python\nprint(1)\n```\nand\n```py\nprint(2)\n```"
    assert extract_code(r) == "print(2)"
    assert extract_code("<think>```python\nx=1\n```</think> none") is None
    assert extract_code("```python\nx=1\n```", after_think=False) == "x=1"


@pytest.mark.docker
def test_code_grader_soft_scores():
    from tasks.grading.registry import make_grader

    tests = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "8\n"]}
    g = make_grader("code", workers=1)
    try:
        grades = g.grade_batch([
            ("<think>x</think>```python\na, b = map(int, input().split())\nprint(a + b)\n```", {"id": "a", "tests": tests}),
            ("<think>x</think>no code", {"id": "b", "tests": tests}),
        ])
    finally:
        g.close()
    assert (grades[0].score, grades[0].correct) == (0.5, False)
    assert grades[1].verdict == "no_code" and grades[1].outcome is Outcome.WRONG and grades[1].score == 0.0


@pytest.mark.docker
def test_code_grader_keeps_its_containers_between_batches():
    """A trainer grades every step: the grader's pool starts once and is closed by close()."""
    from tasks.grading.registry import make_grader

    tests = {"inputs": ["2\n"], "outputs": ["4\n"]}
    item = ("<think>x</think>```python\nprint(int(input()) * 2)\n```", {"id": "a", "tests": tests})
    g = make_grader("code", workers=1)
    try:
        assert [x.correct for x in g.grade_batch([item])] == [True]
        pool = g._pool
        assert pool is not None
        assert [x.correct for x in g.grade_batch([item, item])] == [True, True]
        assert g._pool is pool and pool.stats["started"] == 1
    finally:
        g.close()
    assert g._pool is None and pool._closed


@pytest.mark.parametrize("res, outcome, score", [
    ({"verdict": "accepted", "reward": 1.0}, Outcome.CORRECT, 1.0),
    ({"verdict": "timeout", "reward": 0.0}, Outcome.WRONG, 0.0),
    ({"verdict": "timeout", "reward": 0.25}, Outcome.WRONG, 0.25),
    ({"verdict": "memory_limit", "reward": 0.0}, Outcome.WRONG, 0.0),
    ({"verdict": "compile_error", "reward": 0.0}, Outcome.WRONG, 0.0),
    ({"verdict": "sandbox_error", "reward": None, "details": {"reason": "docker down"}}, Outcome.INFRA, 0.0),
])
def test_sandbox_verdicts_map_to_outcomes(res, outcome, score):
    g = grade_from_result(res)
    assert (g.outcome, g.score, g.verdict) == (outcome, score, res["verdict"])


class _Recorder:
    """Stands in for the sandbox: records the job rows, answers each with the verdict in `script`."""
    def __init__(self, script):
        self.script, self.jobs = script, []

    def __call__(self, jobs):
        self.jobs += jobs
        return [{"id": j["id"], "verdict": v, "passed": 0, "total": 16, "reward": None if v == "sandbox_error" else 0.0,
                 "details": {}} for j, v in zip(jobs, self.script)]


def _grade(monkeypatch, items, script):
    rec = _Recorder(script)
    monkeypatch.setattr(CodeGrader, "_verify", lambda self, jobs: rec(jobs))
    return CodeGrader(workers=1).grade_batch(items), rec.jobs


def test_an_infinite_loop_gets_the_wrong_answer_reward_and_a_sandbox_fault_none(monkeypatch):
    row = {"id": "p1", "tests": TESTS}
    grades, _ = _grade(monkeypatch, [(PROGRAM, row), (PROGRAM, row), ("<think>x</think>no code", row)],
                       ["timeout", "sandbox_error"])
    assert [(g.outcome, g.verdict) for g in grades] == [
        (Outcome.WRONG, "timeout"), (Outcome.INFRA, "sandbox_error"), (Outcome.WRONG, "no_code")]
    resp = [PROGRAM, PROGRAM, "<think>x</think>no code"]
    assert [reward_from_grade("code", r, g, RewardConfig()) for r, g in zip(resp, grades)] == [0.0, None, 0.0]
    assert [reward_from_grade("code", r, g, RewardConfig(scale_code=True)) for r, g in zip(resp, grades)] == [-1.0, None, -1.0]


def test_every_rollout_of_a_problem_carries_its_problem_id(monkeypatch):
    a, b = {"id": "p1", "tests": TESTS}, {"id": "p2", "tests": TESTS}
    _, jobs = _grade(monkeypatch, [(PROGRAM, a), (PROGRAM, b), (PROGRAM, a), (PROGRAM, a)], ["accepted"] * 4)
    assert [j["problem_id"] for j in jobs] == ["p1", "p2", "p1", "p1"]
    assert len({j["id"] for j in jobs}) == 4  # each rollout is still its own job


def test_rollouts_of_one_problem_sample_the_same_tests():
    """sandbox/judge.prepare keys its ≤ 16-test sample on problem_id, not the rollout's own id."""
    from sandbox.config import JudgeConfig
    from sandbox.judge import prepare

    cfg = JudgeConfig(max_tests=16, seed=0)
    code = "print(int(input()) * 2)"
    same = [prepare({"id": f"p1-{i}", "problem_id": "p1", "code": code, "tests": TESTS}, cfg).indices for i in range(4)]
    assert len(same[0]) == 16 and all(s == same[0] for s in same)
    own = [prepare({"id": f"p1-{i}", "code": code, "tests": TESTS}, cfg).indices for i in range(4)]
    assert len({tuple(s) for s in own}) > 1  # keyed by the row id, rollouts would see different tests


def test_a_batch_the_judge_settles_unrun_starts_no_containers():
    """Tests that cannot be judged are settled before the sandbox: no pool is made (no Docker needed)."""
    g = CodeGrader(workers=1)
    (grade,) = g.grade_batch([(PROGRAM, {"id": "p", "tests": {"inputs": ["1\n"]}})])
    assert (grade.outcome, grade.verdict) == (Outcome.INFRA, "invalid_tests") and g._pool is None


def test_an_rl_grading_batch_parses_each_problems_tests_once(monkeypatch):
    """2 problems x 8 rollouts, tests as the rows hold them (JSON text): 2 parses, not 16, and every
    rollout of a problem is judged on the same suite object."""
    import json

    from sandbox import testcases
    from sandbox.judge import prepare
    from tasks.grading.code_grader import job_rows

    calls = []
    real = testcases.parse_test_suite
    monkeypatch.setattr(testcases, "parse_test_suite", lambda t: calls.append(t) or real(t))
    testcases._suite_of_text.cache_clear()
    rows = [{"id": "p1", "tests": json.dumps({"inputs": ["1\n", "2\n"], "outputs": ["1\n", "2\n"]})},
            {"id": "p2", "tests": json.dumps({"assert_code": "assert f(1) == 2\nassert f(2) == 3"})}]
    items = [(f"```python\nprint({k})\n```", row) for row in rows for k in range(8)]
    jobs, where, settled = job_rows(items)
    prepared = [prepare(job) for job in jobs]
    assert len(jobs) == 16 and not settled and len(calls) == 2
    assert len({id(p.suite) for p in prepared[:8]}) == 1 and prepared[0].suite is not prepared[8].suite

import pytest

from tasks.grading.code_extract import extract_code


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
    assert grades[1].detail == "no_code" and grades[1].score == 0.0


@pytest.mark.docker
def test_code_grader_keeps_its_containers_between_batches():
    """A trainer grades every step: the grader's pool starts once and is closed by close()."""
    from tasks.grading.registry import make_grader
    from tasks.verification import worker

    tests = {"inputs": ["2\n"], "outputs": ["4\n"]}
    item = ("<think>x</think>```python\nprint(int(input()) * 2)\n```", {"id": "a", "tests": tests})
    g = make_grader("code", workers=1)
    try:
        assert [x.correct for x in g.grade_batch([item])] == [True]
        pools = [p for (owner, _), p in worker._pools.items() if owner == g.owner]
        assert len(pools) == 1
        assert [x.correct for x in g.grade_batch([item, item])] == [True, True]
        assert pools[0].stats["started"] == 1
    finally:
        g.close()
    assert not [k for k in worker._pools if k[0] == g.owner]

"""Round 4 of the code reward's classes, run on the in-container runner as a plain subprocess (no Docker):
for each class a hostile program that must not be rewarded and, where honest programs were rejected, the
honest twin that must be (sandbox/runner.py: CallArgs, _TestGlobals, check_run; sandbox/asserts.py).
One behaviour per test."""
import pytest

from sandbox.verdicts import stdout_text
from tests.sandbox.test_runner_local import checks, runner  # noqa: F401 (runner: the fixture)

CASES = "[(1, 2), (2, 3), (5, 6)]"
INC = "def f(x):\n    return x + 1\n"


# ------------------------------------------------ StopIteration from the program is an error, not an end
@pytest.mark.parametrize("tests", [
    f"assert all(map(lambda p: f(p[0]) == p[1], {CASES}))",
    f"for got, want in zip(map(f, [1, 2, 5]), [2, 3, 6]):\n    assert got == want",
    f"assert [f(a) for a, _ in {CASES}] == [2, 3, 6]",
], ids=["all-map", "zip-map", "listcomp"])
def test_a_stopiteration_the_program_raises_fails_the_test(runner, tests):
    hostile = "def f(x):\n    raise StopIteration\n"
    got, judged = checks(runner, hostile, tests)
    assert judged == ["runtime_error"], got
    assert "StopIteration" in got["0"]["message"]
    assert checks(runner, INC, tests)[1] == ["accepted"]  # the honest twin


# ------------------------------------------------ test code under a main guard runs, and checks something
MAIN_GUARDED = "if __name__ == '__main__':\n    assert f(1) == 2\n    assert f(2) == 3\n"


def test_asserts_under_a_main_guard_run_as_tests_of_their_own(runner):
    assert checks(runner, "def f(x):\n    return 0\n", MAIN_GUARDED)[1] == ["wrong_answer", "wrong_answer"]
    assert checks(runner, INC, MAIN_GUARDED)[1] == ["accepted", "accepted"]


def test_a_main_guard_inside_a_function_runs_too(runner):
    tests = "def run():\n    if __name__ == '__main__':\n        assert f(1) == 2\nrun()\n"
    assert checks(runner, "def f(x):\n    return 0\n", tests)[1] == ["wrong_answer"]
    assert checks(runner, INC, tests)[1] == ["accepted"]


@pytest.mark.parametrize("hostile", [
    "def solve_all(xs):\n    return []\n",                      # the loop runs over nothing
    "def solve_all(xs):\n    return iter(())\n",
    "def solve_all(xs):\n    raise StopIteration\n",
], ids=["empty-list", "empty-iterator", "stopiteration"])
def test_a_test_whose_asserts_the_program_kept_from_running_is_not_a_pass(runner, hostile):
    tests = "for got, want in zip(solve_all([1, 2]), [2, 3]):\n    assert got == want\n"
    got, judged = checks(runner, hostile, tests)
    assert judged[0] in ("wrong_answer", "runtime_error") and judged != ["accepted"], got
    honest = "def solve_all(xs):\n    return [x + 1 for x in xs]\n"
    assert checks(runner, honest, tests)[1] == ["accepted"]


def test_a_unit_with_no_assert_run_says_so(runner):
    got, judged = checks(runner, "def solve_all(xs):\n    return []\n",
                         "for got in solve_all([1]):\n    assert got == 2\n")
    assert judged == ["wrong_answer"] and got["0"]["message"] == "no assert ran: the test checked nothing"


# ------------------------------------------------ header names the test code uses are the header's
ISCLOSE_TESTS = "assert isclose(f(), 2.0)\nassert isclose(f() * 2, 4.0)"


def test_a_program_that_defines_a_header_helper_cannot_judge_itself(runner):
    hostile = "def isclose(*args, **kwargs):\n    return True\ndef f():\n    return 1.0\n"
    assert checks(runner, hostile, ISCLOSE_TESTS)[1] == ["wrong_answer", "wrong_answer"]


def test_test_code_may_call_a_header_name_without_importing_it(runner):
    assert checks(runner, "def f():\n    return 2.0\n", ISCLOSE_TESTS)[1] == ["accepted", "accepted"]


def test_solution_dot_name_is_the_programs_own_object_of_a_header_name(runner):
    code = "def isclose(a, b):\n    return 'mine'\ndef f():\n    return 2.0\n"
    assert checks(runner, code, "assert solution.isclose(1, 2) == 'mine' and isclose(f(), 2.0)")[1] == ["accepted"]


def test_a_header_named_function_under_test_is_still_the_programs(runner):
    # every free name is the header's: they are the functions under test (a program without gcd fails)
    assert checks(runner, "def gcd(a, b):\n    return 42", "assert gcd(4, 6) == 2")[1] == ["wrong_answer"]
    assert checks(runner, "pass", "assert gcd(4, 6) == 2")[1] == ["runtime_error"]


# ------------------------------------------------ quit() ends a stdin program as in a normal interpreter
@pytest.mark.parametrize("ending", ["quit()", "exit()", "quit(0)"])
def test_quit_at_the_end_of_a_stdin_program_is_a_normal_exit(runner, ending):
    r = runner(mode="stdio", code=f"print(int(input()) + 1)\n{ending}\nprint('not reached')", tests=[{"stdin": "2\n"}])
    t = r["results"][0]
    assert stdout_text(t) == "3\n" and t["exit"] == 0, t


# ------------------------------------------------ in-place changes reach the test code at any depth
def test_in_place_changes_to_nested_lists_and_keyword_arguments_reach_the_test(runner):
    code = ("def fill(grid, *, out, table):\n    grid[0][0] = 9\n    out.append(1)\n    table['k'].append(2)\n"
            "    table['new'] = [3]\n")
    tests = ("g = [[0, 0], [0]]\nrow = g[0]\no = []\nt = {'k': [1]}\nk = t['k']\nfill(g, out=o, table=t)\n"
             "assert row == [9, 0] and g[0] is row\nassert o == [1]\nassert k == [1, 2] and t == {'k': [1, 2], 'new': [3]}")
    got, judged = checks(runner, code, tests)
    assert judged == ["accepted", "accepted", "accepted"], got


def test_one_list_passed_twice_is_one_list_in_the_program(runner):
    code = "def push(a, b):\n    a.append(1)\n    return len(b)\n"
    got, judged = checks(runner, code, "x = []\nassert push(x, x) == 1 and x == [1]")
    assert judged == ["accepted"], got


def test_a_list_inside_itself_travels_and_changes_in_place(runner):
    code = "def depth_two(a):\n    a.append(a[0] is a)\n    return a[0][0] is a\n"
    got, judged = checks(runner, code, "x = []\nx.append(x)\nassert depth_two(x) is True and x[1] is True")
    assert judged == ["accepted"], got


# ------------------------------------------------ arguments keep their types on the way to the program
def test_arguments_keep_their_collections_types(runner):
    code = ("def probe(c, d, fs, p, q, od):\n"
            "    return [c['missing'], d['missing'], hash(fs) == hash(frozenset({1})), p.y, q.maxlen,\n"
            "            type(od).__name__, type(c).__name__, type(d).__name__]\n")
    tests = ("P = namedtuple('P', 'x y')\n"
             "assert probe(Counter('aab'), defaultdict(list), frozenset({1}), P(1, 2), deque([1], maxlen=3),"
             " OrderedDict(a=1)) == [0, [], True, 2, 3, 'OrderedDict', 'Counter', 'defaultdict']")
    got, judged = checks(runner, code, tests)
    assert judged == ["accepted"], got


def test_returned_values_keep_their_collections_types(runner):
    code = ("from collections import Counter, namedtuple, OrderedDict\nP = namedtuple('P', 'x y')\n"
            "def c():\n    return Counter('aab')\ndef p():\n    return P(1, 2)\n"
            "def o():\n    return OrderedDict([('b', 1), ('a', 2)])\ndef fz():\n    return frozenset({1, 2})\n")
    tests = ("assert c()['zz'] == 0 and c()['a'] == 2\nassert p().y == 2 and p() == (1, 2)\n"
             "assert o() != OrderedDict([('a', 2), ('b', 1)])\nassert {fz(): 1}[frozenset({1, 2})] == 1")
    got, judged = checks(runner, code, tests)
    assert judged == ["accepted"] * 4, got


def test_a_defaultdict_from_the_program_keeps_its_default(runner):
    code = "from collections import defaultdict\ndef groups():\n    return defaultdict(list, {1: [2]})\n"
    got, judged = checks(runner, code, "g = groups()\nassert g[5] == [] and g[1] == [2]")
    assert judged == ["accepted"], got


@pytest.mark.parametrize("factory", ["input", "print", "breakpoint", "globals"])
def test_a_default_factory_that_would_act_on_the_checker_does_not_travel(runner, factory):
    # decoded in the checker, defaultdict(input) would read the checker's stdin on a missing key
    code = f"from collections import defaultdict\ndef groups():\n    return defaultdict({factory})\n"
    got, judged = checks(runner, code, "assert groups()['x'] is not None")
    assert judged == ["runtime_error"], got


# ------------------------------------------------ a second pass as the policy: the neighbours of each class
TAKEOVER = r'''
import os, json, socket
def _answer_everything(first, answer):
    """Write the channel itself: `first` now, then `answer` to every request."""
    s = socket.socket(fileno=5)
    f = s.makefile("rb")
    s.sendall((json.dumps(first) + "\n").encode())
    while True:
        line = f.readline()
        if not line:
            os._exit(0)
        s.sendall((json.dumps(answer) + "\n").encode())
'''


@pytest.mark.parametrize("tests", ["assert all(map(is_prime, [2, 3, 5, 7]))",
                                   "assert not any(map(is_prime, [4, 6, 8]))"])
def test_a_forged_end_of_iteration_in_answer_to_a_call_is_no_pass(runner, tests):
    hostile = TAKEOVER + "def is_prime(n):\n    _answer_everything({'stop': True}, {'stop': True})\n"
    assert checks(runner, hostile, tests)[1] != ["accepted"]


@pytest.mark.parametrize("tests", [
    "try:\n    f(-1)\n    assert False\nexcept ValueError:\n    pass",
    "try:\n    f(-1)\nexcept ValueError:\n    pass\nelse:\n    assert False",
    "if f(3) != 3:\n    assert False, 'bad'",
], ids=["try-assert-false", "try-else", "if-assert-false"])
def test_a_test_that_checks_by_a_failures_absence_passes_an_honest_program(runner, tests):
    honest = "def f(x):\n    if x < 0:\n        raise ValueError('neg')\n    return x\n"
    assert checks(runner, honest, tests)[1] == ["accepted"]
    assert checks(runner, "def f(x):\n    return 0\n", tests)[1] != ["accepted"]  # its hostile twin


LOOP_ABSENCE = {
    "if-assert-false": "for got, want in zip(f([1, 2]), [2, 3]):\n    if got != want:\n        assert False",
    "assert-0": "for got, want in zip(f([1, 2]), [2, 3]):\n    if got != want:\n        assert 0, 'differs'",
    "in-a-helper": "def check(g):\n    for got, want in zip(g([1, 2]), [2, 3]):\n        if got != want:\n"
                   "            assert False, (got, want)\ncheck(f)",
}


@pytest.mark.parametrize("tests", list(LOOP_ABSENCE.values()), ids=list(LOOP_ABSENCE))
def test_a_failure_by_absence_in_a_loop_over_an_empty_result_checked_nothing(runner, tests):
    """`if got != want: assert False` per element: with no elements, no comparison ran (the guard is the
    check, counted when it runs), so an empty result is no pass."""
    assert checks(runner, "def f(xs):\n    return []\n", tests)[1] == ["wrong_answer"]
    assert checks(runner, "def f(xs):\n    return [x + 1 for x in xs]\n", tests)[1] == ["accepted"]


def test_a_loop_whose_else_fails_is_the_check(runner):
    """`for … else: assert False` (the value must be found): the loop runs once whatever the program returns;
    an empty result reaches the `else` and fails."""
    tests = "for x in f([1, 2]):\n    if x == 3:\n        break\nelse:\n    assert False"
    assert checks(runner, "def f(xs):\n    return [x + 1 for x in xs]\n", tests)[1] == ["accepted"]
    assert checks(runner, "def f(xs):\n    return []\n", tests)[1] == ["wrong_answer"]


def test_an_outer_condition_the_program_decides_checks_nothing(runner):
    """`if f(1) > 0: if f(2) != 3: assert False`: the check is the inner `if`, next to the failure, as
    `if f(1) > 0: assert f(2) == 3` would be; a program that makes the outer condition false ran none."""
    tests = "if f([1])[0] > 0:\n    if f([2])[0] != 3:\n        assert False"
    assert checks(runner, "def f(xs):\n    return [x + 1 for x in xs]\n", tests)[1] == ["accepted"]
    assert checks(runner, "def f(xs):\n    return [0]\n", tests)[1] == ["wrong_answer"]


def test_a_loop_that_must_not_run_is_its_own_check(runner):
    """`for x in f(): assert False` says f() yields nothing: the loop is the check, so the empty result
    passes and any element fails."""
    tests = "for x in f([]):\n    assert False, x"
    assert checks(runner, "def f(xs):\n    return list(xs)\n", tests)[1] == ["accepted"]
    assert checks(runner, "def f(xs):\n    return [1]\n", tests)[1] == ["wrong_answer"]


def test_an_except_that_fails_leaves_the_check_to_the_asserts_it_guards(runner):
    """`try: <asserts in a loop> except Exception: assert False`: the `except` only turns errors into
    failures; with an empty result no assert of the body ran, and nothing was checked."""
    tests = ("try:\n    for got, want in zip(f([1, 2]), [2, 3]):\n        assert got == want\n"
             "except Exception:\n    assert False")
    assert checks(runner, "def f(xs):\n    return [x + 1 for x in xs]\n", tests)[1] == ["accepted"]
    assert checks(runner, "def f(xs):\n    return []\n", tests)[1] == ["wrong_answer"]


def test_named_tuple_types_of_one_run_never_reach_the_next(runner):
    flood = "from collections import namedtuple\ndef f():\n    return [namedtuple('T%d' % i, 'a')(i) for i in range(300)]\n"
    checks(runner, flood, "assert f() == [1]")
    honest = "from collections import namedtuple\nQ = namedtuple('Q', 'u v')\ndef p():\n    return Q(1, 2)\n"
    assert checks(runner, honest, "assert p() == (1, 2) and p().v == 2")[1] == ["accepted"]


def test_a_large_nested_argument_the_call_leaves_alone_is_not_sent_back(runner):
    honest = "def f(edges):\n    return len(edges)\n"
    assert checks(runner, honest, "assert f([[i, i + 1] for i in range(30000)]) == 30000")[1] == ["accepted"]


def test_a_defaultdict_with_the_tests_own_factory_travels_without_it(runner):
    tests = "d = defaultdict(lambda: 0)\nd['a'] += 2\nassert total(d) == 2"
    assert checks(runner, "def total(d):\n    return sum(d.values())\n", tests)[1] == ["accepted"]


@pytest.mark.parametrize("tests", ["from solution import f\nassert isclose(f(), 2.0)",
                                   "import solution\nassert isclose(solution.f(), 2.0)"])
def test_importing_the_solution_keeps_header_helpers_the_headers(runner, tests):
    hostile = "def isclose(*a, **k):\n    return True\ndef f():\n    return 1.0\n"
    assert checks(runner, hostile, tests)[1] == ["wrong_answer"]
    assert checks(runner, "def f():\n    return 2.0\n", tests)[1] == ["accepted"]


def test_a_header_named_function_tested_directly_is_the_programs(runner):
    assert checks(runner, "def gcd(a, b):\n    return 1\ndef lcm_list(xs):\n    return 6\n",
                  "assert gcd(12, 18) == 6\nassert lcm_list([2, 3]) == 6")[1] == ["wrong_answer", "accepted"]
    assert checks(runner, "def count(lst):\n    return sum(lst)\ndef total(x):\n    return x\n",
                  "assert count([True, False, True]) == 2\nassert total(3) == 3")[1] == ["accepted", "accepted"]


def test_a_builtin_function_the_test_passes_reaches_the_program(runner):
    assert checks(runner, "def apply(f, x):\n    return x\n", "assert apply(print, 3) == 3")[1] == ["accepted"]

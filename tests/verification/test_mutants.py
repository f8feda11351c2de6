"""Mutant generation (pure): deterministic, one edit per mutant, every operator kind, always valid Python,
never the reference itself."""
import ast

import pytest

from tasks.verification.mutants import MUTATORS, generate_mutants, register_mutator

PROGRAM = '''
def count(xs, n):
    """How many of the first n items are positive and even."""
    total = 0
    for i in range(0, n):
        if xs[i] > 0 and not xs[i] % 2:
            total += 1
    return total


if __name__ == "__main__":
    xs = list(map(int, input().split()))
    print(count(xs[1:], xs[0]))
'''


def _mutants(code=PROGRAM, limit=1000, seed=0, key="p"):
    return generate_mutants(code, limit, seed, key)


def test_same_inputs_same_mutants():
    a, b = _mutants(limit=7), _mutants(limit=7)
    assert [m.code for m in a] == [m.code for m in b] and len(a) == 7


def test_seed_and_key_choose_which_mutants():
    base = [m.code for m in _mutants(limit=5)]
    assert [m.code for m in _mutants(limit=5, seed=1)] != base
    assert [m.code for m in _mutants(limit=5, key="q")] != base


@pytest.mark.parametrize("operator, before, after", [
    ("arithmetic", "total += 1", "total -= 1"),
    ("arithmetic", "xs[i] % 2", "xs[i] // 2"),
    ("comparison", "xs[i] > 0", "xs[i] >= 0"),
    ("logical", "xs[i] > 0 and (not xs[i] % 2)", "xs[i] > 0 or not xs[i] % 2"),
    ("logical", "(not xs[i] % 2)", "xs[i] % 2"),
    ("constant", "total = 0", "total = 1"),
    ("constant", "total += 1", "total += 0"),
    ("boundary", "range(0, n)", "range(0, n - 1)"),
    ("boundary", "range(0, n)", "range(1, n)"),
    ("boundary", "xs[1:]", "xs[2:]"),
    ("boundary", "xs[1:]", "xs[1:-1]"),
])
def test_each_operator_kind(operator, before, after):
    reference = ast.unparse(ast.parse(PROGRAM))
    assert before in reference
    made = [m for m in _mutants() if m.operator == operator]
    assert any(m.code == reference.replace(before, after, 1) for m in made), [m.description for m in made]


def test_every_mutant_is_valid_python_one_edit_away_and_distinct():
    reference = ast.unparse(ast.parse(PROGRAM))
    made = _mutants()
    assert {m.operator for m in made} == set(MUTATORS)
    assert len({m.code for m in made}) == len(made)
    for m in made:
        compile(m.code, "<mutant>", "exec")
        assert m.code != reference
        # one edit: exactly one line of the unparsed program differs
        changed = [(a, b) for a, b in zip(reference.splitlines(), m.code.splitlines()) if a != b]
        assert len(changed) == 1 and len(m.code.splitlines()) == len(reference.splitlines()), m.description


def test_main_guard_and_annotations_are_not_mutated():
    code = 'def f(x: int = 3) -> int:\n    return x\n\nif __name__ == "__main__":\n    print(f(int(input())))\n'
    made = _mutants(code)
    assert [m.description for m in made] == ["line 1: `3` → `4`"]


def test_the_limit_takes_turns_across_operator_kinds():
    made = _mutants(limit=len(MUTATORS))
    assert [m.operator for m in made] == list(MUTATORS)


def test_a_formatting_only_difference_is_not_a_mutant():
    # `x[0:]` → `x[1:]` by the constant operator and by the boundary operator are the same program once
    code = "def f(x):\n    return x[0:]\n"
    made = _mutants(code)
    assert len({m.code for m in made}) == len(made)
    assert sum("x[1:]" in m.code for m in made) == 1


@pytest.mark.parametrize("code", ["", "def f(:\n", "print('no operators here')\n"])
def test_nothing_to_mutate_gives_no_mutants(code):
    assert _mutants(code) == []


def test_limit_zero_is_off():
    assert generate_mutants(PROGRAM, 0) == []


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="already registered"):
        register_mutator("arithmetic")(lambda node: [])


def test_a_reference_too_deep_to_mutate_gives_no_mutants_and_a_reason_never_an_exception():
    made = generate_mutants("x = " + " + ".join(["a"] * 1000), limit=6)  # ast.unparse itself recurses too deep
    assert made == [] and "too deeply nested" in made.reason


def test_a_300_term_expression_is_mutated():
    # the reviewer's case: deep-copying the 300-level BinOp chain raised RecursionError out of the stage
    code = "x = " + " + ".join(["a"] * 300)
    made = generate_mutants(code, limit=6)
    assert len(made) == 6 and made.reason is None
    assert {m.operator for m in made} == {"arithmetic"} and all(m.code.count(" - ") == 1 for m in made)


def test_sites_and_mutants_copy_no_subtree(monkeypatch):
    import copy

    def boom(*args, **kwargs):
        raise AssertionError("a subtree was deep-copied")

    expected = [m.code for m in _mutants()]
    monkeypatch.setattr(copy, "deepcopy", boom)
    assert [m.code for m in _mutants()] == expected


@pytest.mark.parametrize("code, reason", [("def f(:\n", "does not parse"),
                                          ("print('no operators here')\n", "no mutation site")])
def test_no_mutants_say_why(code, reason):
    assert reason in _mutants(code).reason

"""Probe inputs for a code problem: inputs near its tests' inputs, to tell a program that behaves like the
reference from one that only passes the tests.

    probes = derive_probes(tests, reference_code, limit=8, seed=0, key=problem_id)
    # -> {"inputs": [...], "outputs": ["", ...]}                 (stdin/stdout problems)
    # -> {"fn_name": "f", "inputs": [[...], ...], "outputs": [None, ...]}   (call-based and assert-style)

The outputs are placeholders: the sandbox runs the reference and a mutant on the probes and the host
compares what they printed or returned (tasks/verification/strength.py), so no expected value is needed.

Which inputs (the rule, and why it keeps to the problem's domain as far as a generic rule can):
- stdin/stdout: a test input with ONE integer token moved by one, away from zero or towards it but never
  to or across zero (5 → 6 or 4, 1 → 2, 0 → 1, -3 → -4 or -2), so a size stays a size and a sign stays a
  sign; when the input has no integer, one word of two or more letters loses its last letter.
  At most four token positions per input (first, last, two between), inputs up to 20,000 characters.
- call-based: a test's argument list with ONE argument changed the same way: an int as above, a float
  moved by one away from zero, a bool flipped, a string of 2+ characters shortened by its last character
  or reversed, a list of 2+ items shortened by its last item or reversed, or one of its first, middle or
  last items changed by these rules (two levels deep).
- assert-style: the calls `f(literal, ...)` of a function the reference defines at top level, found in
  the asserts (also under another name bound to it: `g = f`, or HumanEval's `def check(candidate)` +
  `check(f)`; the most called such function; literal arguments that JSON carries, tuples as lists, as a
  call-based test passes them): those calls themselves (an assert need not pin the value, e.g.
  `assert f(3) > 0`), then their changes as above.
Probes equal to a test input are left out for stdin/stdout and call-based problems (the tests already
judge those). The same (tests, code, limit, seed, key) always gives the same probes: candidates are
shuffled with `random.Random(f"{seed}:{key}")` and the first `limit` taken (assert-style: the calls from
the asserts first, up to half the limit).
An input the reference itself cannot handle (it crashes, times out, answers differently on two runs) is
discarded by the caller, so a probe outside the problem's domain costs a run, not a wrong count.
"""
from __future__ import annotations

import ast
import json
import math
import random
import re
from collections import Counter
from typing import Any

from sandbox.testcases import ASSERT, CALL, STDIO, InvalidTests, parse_tests

__all__ = ["derive_probes"]

MAX_INPUT_CHARS = 20_000  # larger inputs are not varied: a probe must stay cheap to run and to send
MAX_POSITIONS = 4  # token or item positions varied per input / list
MAX_ARGS = 6  # argument positions varied per call
_INT = re.compile(r"(?<![\w.+-])-?\d+(?![\w.])")
_WORD = re.compile(r"(?<!\w)[A-Za-z]{2,}(?!\w)")


def _positions(n: int) -> list[int]:
    if n <= MAX_POSITIONS:
        return list(range(n))
    return sorted({0, n - 1, *(round(i * (n - 1) / (MAX_POSITIONS - 1)) for i in range(1, MAX_POSITIONS - 1))})


def _int_moves(v: int) -> list[int]:
    """By one, never to or across zero (0 only moves to 1)."""
    if v > 0:
        return [v + 1] + ([v - 1] if v > 1 else [])
    if v < 0:
        return [v - 1] + ([v + 1] if v < -1 else [])
    return [1]


def _stdin_moves(text: str) -> list[str]:
    if len(text) > MAX_INPUT_CHARS:
        return []
    tokens = list(_INT.finditer(text))
    out = []
    if tokens:
        for p in _positions(len(tokens)):
            m = tokens[p]
            for v in _int_moves(int(m.group())):
                out.append(text[:m.start()] + str(v) + text[m.end():])
        return out
    words = list(_WORD.finditer(text))
    for p in _positions(len(words)):
        m = words[p]
        out.append(text[:m.start()] + m.group()[:-1] + text[m.end():])
    return out


def _value_moves(v: Any, depth: int = 0) -> list[Any]:
    if type(v) is bool:
        return [not v]
    if type(v) is int:
        return _int_moves(v)
    if type(v) is float:
        return [v + 1.0 if v >= 0 else v - 1.0] if math.isfinite(v) else []
    if type(v) is str:
        return [m for m in (v[:-1], v[::-1]) if m != v] if len(v) >= 2 else []
    if type(v) is list:
        out = [m for m in (v[:-1], v[::-1]) if m != v] if len(v) >= 2 else []
        if depth < 1:
            for p in _positions(len(v)):
                out += [v[:p] + [m] + v[p + 1:] for m in _value_moves(v[p], depth + 1)]
        return out
    return []


def _arg_moves(args: list) -> list[list]:
    out = []
    for p in range(min(len(args), MAX_ARGS)):
        out += [args[:p] + [m] + args[p + 1:] for m in _value_moves(args[p])]
    return out


def _json_exact(value: Any) -> bool:
    """Comes back from JSON as an equal value of the same types (so the runner calls with what we mean)."""
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(_json_exact(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _json_exact(v) for k, v in value.items())
    return False


def _aliases(tree: ast.Module, defined: set[str]) -> dict[str, str]:
    """Names that stand for a reference function in a snippet: the function's own name, `g = f`, and the
    parameter of a snippet function called with it (HumanEval's `def check(candidate)` + `check(f)`)."""
    alias = {name: name for name in defined}
    local = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Name) and node.value.id in alias):
            alias[node.targets[0].id] = alias[node.value.id]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in local:
            for param, arg in zip(local[node.func.id].args.args, node.args):
                if isinstance(arg, ast.Name) and arg.id in alias:
                    alias[param.arg] = alias[arg.id]
    return alias


def _listed(value: Any) -> Any:
    """Tuples as lists, as a JSON test passes them (the reference and the mutant get the same value)."""
    if isinstance(value, (list, tuple)):
        return [_listed(v) for v in value]
    return value


def _assert_calls(snippets: list[str], code: str) -> tuple[str, list[list]] | None:
    """(function, argument lists) of the plain calls of the reference's most called top-level function."""
    try:
        defined = {n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef)}
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    calls: list[tuple[str, list]] = []
    for snippet in snippets:
        try:
            tree = ast.parse(snippet)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        alias = _aliases(tree, defined)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in alias
                    and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)):
                continue
            try:
                args = _listed([ast.literal_eval(a) for a in node.args])
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if _json_exact(args) and len(json.dumps(args)) <= MAX_INPUT_CHARS:
                calls.append((alias[node.func.id], args))
    if not calls:
        return None
    fn = Counter(name for name, _ in calls).most_common(1)[0][0]
    return fn, [args for name, args in calls if name == fn]


def _distinct(values: list, exclude: list = ()) -> list:
    seen = {json.dumps(v, sort_keys=True) for v in exclude}
    out = []
    for v in values:
        k = json.dumps(v, sort_keys=True)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


def _assert_snippets(tests: Any) -> list[str]:
    if isinstance(tests, (str, bytes, bytearray)):
        tests = json.loads(tests)
    code = tests["assert_code"]
    return [code] if isinstance(code, str) else list(code)


def derive_probes(tests: Any, code: str, limit: int, seed: int = 0, key: object = "") -> dict | None:
    """A tests object of up to `limit` probe inputs (placeholder outputs), or None when none derive."""
    if limit <= 0:
        return None
    try:
        suite = parse_tests(tests)
    except InvalidTests:
        return None
    rng = random.Random(f"{seed}:{key}")
    if suite.mode == STDIO:
        moved = _distinct([m for x in suite.inputs for m in _stdin_moves(x)], exclude=list(suite.inputs))
        rng.shuffle(moved)
        return {"inputs": moved[:limit], "outputs": [""] * len(moved[:limit])} if moved else None
    if suite.mode == CALL:
        bases = [list(a) for a in suite.inputs if len(json.dumps(a)) <= MAX_INPUT_CHARS]
        moved = _distinct([m for a in bases for m in _arg_moves(a)], exclude=bases)
        rng.shuffle(moved)
        fn, chosen = suite.fn_name, moved[:limit]
    elif suite.mode == ASSERT:
        found = _assert_calls(_assert_snippets(tests), code)
        if found is None:
            return None
        fn, bases = found
        bases = _distinct(bases)
        moved = _distinct([m for a in bases for m in _arg_moves(a)], exclude=bases)
        rng.shuffle(moved)
        own = bases[:max(1, limit // 2)]
        chosen = own + moved[:limit - len(own)]
    else:
        return None
    return {"fn_name": fn, "inputs": chosen, "outputs": [None] * len(chosen)} if chosen else None

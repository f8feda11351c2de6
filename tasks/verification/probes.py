"""Probe inputs for a code problem: inputs near its tests' inputs, to tell a program that behaves like the
reference from one that only passes the tests.

    probes = derive_probes(tests, reference_code, limit=8, seed=0, key=problem_id)
    # -> {"inputs": [...], "outputs": ["", ...]}                 (stdin/stdout problems)
    # -> {"fn_name": "f", "inputs": [[...], ...], "outputs": [None, ...]}   (call-based and assert-style)

The outputs are placeholders: the sandbox runs the reference and a mutant on the probes and the host
compares what they printed or returned (tasks/verification/strength.py), so no expected value is needed.

Which inputs (the rule, and why it keeps to the problem's domain as far as a generic rule can): a probe
keeps the test input's SHAPE, since a program need only be right on inputs of the stated form, and a
mutant that differs only on a malformed input (a count that no longer matches what follows it) is an
equivalent program, which would call good tests weak.
- stdin/stdout: a test input with ONE value token moved by one, away from zero or towards it but never
  to or across zero (5 → 6 or 4, 1 → 2, 0 → 1, -3 → -4 or -2), so a size stays a size and a sign stays a
  sign. Never moved, because it may count what follows it (`n` then n numbers, `T` test cases, `n m`
  then n rows): the first integer of the input, and any integer equal to the number of tokens on the
  next non-blank line, to the number of non-blank lines after its own, to the number of tokens after it
  on its own line, or to the length of the next non-blank line when that line is one token (a string or
  a grid row), unless 0 (a zero after the first integer counts nothing that could fall out of step; moved
  to 1 it asks for an item that is not there, and the reference's crash discards the probe). A value that
  happens to equal such a count is kept too: fewer probes, never a wrong one.
  Tokens are never reordered or dropped (no reversal or shortening, unlike call-based lists: a stdin
  sequence is often stated sorted, distinct or of a given length, and a reordered one leaves the domain;
  a ±1 move can still break a stated order or distinctness, the one way left out of the domain). When
  the input has no integer, one word of two or more letters loses its last letter.
  At most four movable token positions per input (first, last, two between), inputs up to 20,000
  characters.
- call-based: a test's argument list with ONE argument changed: an int as above, a float moved by one
  away from zero, a bool flipped, a string of 2+ characters shortened by its last character or reversed,
  a list of 2+ items shortened by its last item or reversed, or one of its first, middle or last items
  changed by these rules (two levels deep). Shape kept as for stdin: an int argument equal to the length
  of a list or string argument of the same call is not moved, and such a list or string is not
  shortened (`f(arr, n)` with n = len(arr)). Lists keep their reversal and item changes even when the
  test's list happens to be sorted: a call's arguments carry no statement of their domain, and on the
  MBPP fixture (bench/strength.py) dropping them lost a survivor that is wrong on an in-domain input
  (`range(len(nums))` → `range(len(nums) - 1)` in "the first duplicate in an array").
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
import bisect
import json
import math
import random
import re
from collections import Counter
from typing import Any

from sandbox.testcases import ASSERT, CALL, STDIO, InvalidTests, parse_test_suite

__all__ = ["derive_probes"]

MAX_INPUT_CHARS = 20_000  # larger inputs are not varied: a probe must stay cheap to run and to send
MAX_POSITIONS = 4  # token or item positions varied per input / list
MAX_ARGS = 6  # argument positions varied per call
_INT = re.compile(r"(?<![\w.+-])-?\d+(?![\w.])")
_WORD = re.compile(r"(?<!\w)[A-Za-z]{2,}(?!\w)")
_TOKEN = re.compile(r"\S+")


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


def _counts(text: str, tokens: list[re.Match]) -> set[int]:
    """Indices of the integer tokens that may count what follows them (the module's stdin rule). Linear in
    the input (plus a log per token)."""
    lines = text.split("\n")
    starts, words = [], []  # each line's offset; the offsets of its whitespace-separated tokens
    offset = 0
    for line in lines:
        starts.append(offset)
        words.append([offset + w.start() for w in _TOKEN.finditer(line)])
        offset += len(line) + 1
    following = [0] * (len(lines) + 1)  # non-blank lines after line r; the next non-blank one
    nxt: list[int | None] = [None] * (len(lines) + 1)
    for r in range(len(lines) - 1, -1, -1):
        following[r] = following[r + 1] + (1 if words[r + 1:r + 2] and words[r + 1] else 0)
        nxt[r] = (r + 1) if r + 1 < len(lines) and words[r + 1] else nxt[r + 1]
    counts = {0}
    for k, m in enumerate(tokens):
        r = bisect.bisect_right(starts, m.start()) - 1
        sizes = {following[r], len(words[r]) - bisect.bisect_right(words[r], m.start())}
        if nxt[r] is not None:
            n = nxt[r]
            sizes.add(len(words[n]))
            if len(words[n]) == 1:
                sizes.add(len(lines[n].strip()))
        if int(m.group()) in sizes - {0}:  # a zero counts nothing that a move could put out of step
            counts.add(k)
    return counts


def _stdin_moves(text: str) -> list[str]:
    if len(text) > MAX_INPUT_CHARS:
        return []
    tokens = list(_INT.finditer(text))
    out = []
    if tokens:
        counts = _counts(text, tokens)
        movable = [m for k, m in enumerate(tokens) if k not in counts]
        for p in _positions(len(movable)):
            m = movable[p]
            for v in _int_moves(int(m.group())):
                out.append(text[:m.start()] + str(v) + text[m.end():])
        return out
    words = list(_WORD.finditer(text))
    for p in _positions(len(words)):
        m = words[p]
        out.append(text[:m.start()] + m.group()[:-1] + text[m.end():])
    return out


def _value_moves(v: Any, depth: int = 0, resize: bool = True) -> list[Any]:
    """`resize`: False when the value's length is pinned by the input's shape (it is not shortened)."""
    if type(v) is bool:
        return [not v]
    if type(v) is int:
        return _int_moves(v) if resize else []
    if type(v) is float:
        return [v + 1.0 if v >= 0 else v - 1.0] if math.isfinite(v) else []
    if type(v) in (str, list) and len(v) >= 2:
        out = [m for m in ([v[:-1]] if resize else []) + [v[::-1]] if m != v]
    else:
        out = []
    if type(v) is list and depth < 1:
        for p in _positions(len(v)):
            out += [v[:p] + [m] + v[p + 1:] for m in _value_moves(v[p], depth + 1)]
    return out


def _arg_moves(args: list) -> list[list]:
    lengths = {len(a) for a in args if type(a) in (list, str)}
    sizes = {a for a in args if type(a) is int}
    out = []
    for p in range(min(len(args), MAX_ARGS)):
        a = args[p]
        pinned = (type(a) is int and a in lengths) or (type(a) in (list, str) and len(a) in sizes)
        out += [args[:p] + [m] + args[p + 1:] for m in _value_moves(a, resize=not pinned)]
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
        suite = parse_test_suite(tests)
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

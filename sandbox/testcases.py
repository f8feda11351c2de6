"""The one parser of a row's `tests` (curation, validation, the sandbox client and the graders all use
it), the count of what will run and be scored, and which tests to sample.

Accepted forms (the record schema's `tests` field), as a dict or its JSON string:
- stdin/stdout: {"inputs": ["1 2\\n", ...], "outputs": ["3\\n", ...]}
  (an input or output given as a list of lines is joined with newlines)
- call-based:   {"fn_name": "add", "inputs": [[1, 2], ...], "outputs": [3, ...]}
  (LiveCodeBench's functional form is also read: each input a string of JSON values one per line,
  each output a JSON string)
- assert-style: {"assert_code": "..."} or {"assert_code": ["...", ...]}: each top-level statement holding
  an assert is one test (sandbox/asserts.py splits the snippets into the units a checker process runs)
Also a list of {"input": ..., "output": ...} objects (LiveCodeBench stdin tests).
A key whose value is null is absent, for every key: a Parquet struct column that holds several forms gives
each row every form's keys, the others null (`{"assert_code": null, "inputs": [...], "outputs": [...]}`).

Trust: no expected stdout or return value enters the container; they are compared on the host.
Assert-style test code runs in a checker process that never loads the program's code and gets the
program's values as plain data (so an "always equal" object or an int subclass cannot pass). A snippet
that cannot be judged makes the tests invalid (InvalidTests, the `invalid_tests` verdict).
"""
from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from typing import Any

from sandbox.asserts import AssertTest, NoAssert, UnjudgeableAssert, split_snippet

STDIO, CALL, ASSERT = "stdio", "call", "assert"


class InvalidTests(ValueError):
    """The tests cannot be run as given; the message says why."""


class UnjudgeableTests(InvalidTests):
    """Well-formed assert-style tests that cannot be judged (no assert, nothing of the program used)."""


@dataclass(frozen=True)
class TestSuite:
    """Scored tests: `inputs[i]` and `outputs[i]` are test i. Assert-style: `inputs` are AssertTests,
    `outputs` None, and `programs` the snippets (Snippet: the units the checker runs)."""

    mode: str  # STDIO | CALL | ASSERT
    inputs: tuple  # stdin strings | argument lists | AssertTests
    outputs: tuple | None  # expected stdout strings | expected values | None for assert-style
    fn_name: str | None = None
    programs: tuple = ()  # assert-style: the snippets, as Snippets

    def __len__(self) -> int:
        return len(self.inputs)

    def plan(self, indices: list[int]) -> tuple[list[dict], list[int]]:
        """(runner tests, position of each chosen test's run among them) for the chosen test indices.

        stdin/stdout and call-based: one run per test. Assert-style: one run per snippet holding a chosen
        test (its other tests run too, unscored). stdin/stdout and call-based runner tests never hold an
        expected output; assert-style ones go to the checker, never to the program."""
        if self.mode != ASSERT:
            key = "stdin" if self.mode == STDIO else "args"
            return [{key: self.inputs[i]} for i in indices], list(range(len(indices)))
        snippets = sorted({self.inputs[i].snippet for i in indices})
        where = {s: n for n, s in enumerate(snippets)}
        return ([_assert_run(self.programs[s]) for s in snippets],
                [where[self.inputs[i].snippet] for i in indices])


def _assert_run(snippet) -> dict:
    """The runner test for one snippet: its plain calls (the program makes them and reports the values),
    or its units for the checker."""
    if snippet.calls is not None:
        from sandbox.runner import encode_value

        return {"calls": [[c.name, encode_value(list(c.args))] for c in snippet.calls]}
    return {"units": [list(u) for u in snippet.units], "free": list(snippet.free), "tested": list(snippet.tested)}


def _text(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + ("\n" if value else "")
    raise InvalidTests(f"{what} must be a string (or a list of lines), got {type(value).__name__}")


def _lcb_args(text: str, i: int) -> list:
    try:
        return [json.loads(line) for line in text.split("\n") if line.strip()]
    except (ValueError, RecursionError) as exc:
        raise InvalidTests(f"input {i} is not JSON values one per line: {exc}") from None


def parse_test_suite(tests: Any) -> TestSuite:
    """The TestSuite of a tests value in any accepted form (module docstring); InvalidTests if none."""
    if isinstance(tests, (bytes, bytearray)):
        tests = tests.decode("utf-8", "replace")
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser's depth
            raise InvalidTests(f"tests is not valid JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
    if isinstance(tests, list) and tests and all(isinstance(t, dict) and "input" in t for t in tests):
        tests = {"inputs": [t["input"] for t in tests], "outputs": [t.get("output") for t in tests]}
    if not isinstance(tests, dict):
        raise InvalidTests(f"tests must be an object, got {type(tests).__name__}")
    tests = without_nulls(tests)

    if "assert_code" in tests:
        return _assert_suite(tests["assert_code"])

    inputs, outputs = tests.get("inputs"), tests.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise InvalidTests("tests need `inputs` and `outputs` lists (or `assert_code`)")
    if len(inputs) != len(outputs):
        raise InvalidTests(f"{len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs:
        raise InvalidTests("no tests")

    fn_name = tests.get("fn_name")
    if fn_name is None or fn_name == "":
        return TestSuite(STDIO, tuple(_text(x, f"input {i}") for i, x in enumerate(inputs)),
                         tuple(_text(y, f"output {i}") for i, y in enumerate(outputs)))
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise InvalidTests(f"fn_name {fn_name!r} is not a Python identifier")
    if all(isinstance(x, str) for x in inputs):  # LiveCodeBench functional: JSON text
        args = tuple(_lcb_args(x, i) for i, x in enumerate(inputs))
        expected = []
        for i, y in enumerate(outputs):
            try:
                expected.append(json.loads(y) if isinstance(y, str) else y)
            except (ValueError, RecursionError):
                raise InvalidTests(f"output {i} is not JSON") from None
        return TestSuite(CALL, args, tuple(expected), fn_name)
    for i, x in enumerate(inputs):
        if not isinstance(x, list):
            raise InvalidTests(f"input {i} must be the argument list, got {type(x).__name__}")
    return TestSuite(CALL, tuple(inputs), tuple(outputs), fn_name)


def without_nulls(tests: dict) -> dict:
    """The tests object without its null-valued keys: a null key is an absent one (module docstring)."""
    return {k: v for k, v in tests.items() if v is not None}


def _assert_suite(snippets: Any) -> TestSuite:
    snippets = [snippets] if isinstance(snippets, str) else snippets
    if not isinstance(snippets, list) or not snippets or not all(isinstance(s, str) for s in snippets):
        raise InvalidTests("assert_code must be a non-empty string or list of strings")
    return _rewritten(tuple(snippets))


@functools.lru_cache(maxsize=4096)
def _rewritten(snippets: tuple[str, ...]) -> TestSuite:
    """Splitting costs ~1 ms a snippet; RL grades each problem's tests once per rollout and step, so the
    (immutable) suites are cached by their snippets' text. Failures are not cached: they raise."""
    programs, tests = [], []
    for i, snippet in enumerate(snippets):
        if not snippet.strip():
            raise InvalidTests(f"assert_code {i} is empty")
        try:
            split = split_snippet(snippet)
        except NoAssert:
            continue  # a snippet with no assert (setup only) tests nothing
        except UnjudgeableAssert as exc:
            raise UnjudgeableTests(f"assert_code {i}: {exc}") from None
        k = 0
        for source in (src for kind, src in split.units if kind == "test"):
            tests.append(AssertTest(len(programs), k, " ".join(source.split())[:200]))
            k += 1
        programs.append(split)
    if not tests:
        raise UnjudgeableTests("assert_code has no assert that tests the program")
    return TestSuite(ASSERT, tuple(tests), None, programs=tuple(programs))


SUITE_CACHE = 256  # distinct tests texts kept parsed per process: a grading batch's problems, with room


def test_suite_of(tests: Any) -> TestSuite:
    """parse_test_suite, once per distinct tests text in this process: every rollout of a problem carries
    the same JSON text, so an RL step parses each problem's tests once, not once per rollout (a TestSuite
    is immutable, so one object serves them all). Other forms (dicts) are parsed each time."""
    if isinstance(tests, str):
        return _suite_of_text(tests)
    return parse_test_suite(tests)


@functools.lru_cache(maxsize=SUITE_CACHE)
def _suite_of_text(text: str) -> TestSuite:
    return parse_test_suite(text)


def count_tests(tests: Any) -> int:
    """How many tests will run and be scored separately (0 when the tests are invalid or absent)."""
    try:
        return len(test_suite_of(tests))
    except InvalidTests:
        return 0


def sample_indices(n: int, k: int, seed: int, key: Any) -> list[int]:
    """Up to k of range(n), in order; the same (seed, key) always picks the same tests."""
    if k <= 0 or n <= k:
        return list(range(n))
    return sorted(random.Random(f"{seed}:{key}").sample(range(n), k))

"""Parse a row's `tests` into one of three shapes, and sample which of them to run.

Accepted forms (../shared/DESIGN.md), as a dict or its JSON string:
- stdin/stdout: {"inputs": ["1 2\\n", ...], "outputs": ["3\\n", ...]}
  (an input or output given as a list of lines is joined with newlines)
- call-based:   {"fn_name": "add", "inputs": [[1, 2], ...], "outputs": [3, ...]}
  (LiveCodeBench's functional form is also read: each input a string of JSON values one per line,
  each output a JSON string)
- assert-style: {"assert_code": "..."} or {"assert_code": ["...", ...]} (one test per snippet)
Also a list of {"input": ..., "output": ...} objects (LiveCodeBench stdin tests).

Trust: stdin/stdout outputs and call-based return values are compared on the host; expected outputs
never enter the container, and a returned object is rebuilt from plain data, so an "always equal"
object cannot pass. Assert-style tests are different by nature: they run in the program's own process,
so a program written to subvert them (an object whose __eq__ is always True, or one that writes the
harness's completion report itself) can. Prefer the other two forms for RL rewards on hostile models.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

STDIO, CALL, ASSERT = "stdio", "call", "assert"


class InvalidTests(ValueError):
    """The tests cannot be run as given; the message says why."""


@dataclass(frozen=True)
class TestSuite:
    mode: str  # STDIO | CALL | ASSERT
    inputs: tuple  # stdin strings | argument lists | assert snippets
    outputs: tuple | None  # expected stdout strings | expected values | None for assert-style
    fn_name: str | None = None

    def __len__(self) -> int:
        return len(self.inputs)

    def runner_test(self, i: int) -> dict:
        """The i-th test as the runner receives it (never with its expected output)."""
        key = {STDIO: "stdin", CALL: "args", ASSERT: "assert_code"}[self.mode]
        return {key: self.inputs[i]}


def _text(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + ("\n" if value else "")
    raise InvalidTests(f"{what} must be a string (or a list of lines), got {type(value).__name__}")


def _lcb_args(text: str, i: int) -> list:
    try:
        return [json.loads(line) for line in text.split("\n") if line.strip()]
    except ValueError as exc:
        raise InvalidTests(f"input {i} is not JSON values one per line: {exc}") from None


def parse_tests(tests: Any) -> TestSuite:
    if isinstance(tests, (bytes, bytearray)):
        tests = tests.decode("utf-8", "replace")
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError as exc:
            raise InvalidTests(f"tests is not valid JSON: {exc}") from None
    if isinstance(tests, list) and tests and all(isinstance(t, dict) and "input" in t for t in tests):
        tests = {"inputs": [t["input"] for t in tests], "outputs": [t.get("output") for t in tests]}
    if not isinstance(tests, dict):
        raise InvalidTests(f"tests must be an object, got {type(tests).__name__}")

    if "assert_code" in tests:
        snippets = tests["assert_code"]
        snippets = [snippets] if isinstance(snippets, str) else snippets
        if not isinstance(snippets, list) or not snippets or not all(isinstance(s, str) for s in snippets):
            raise InvalidTests("assert_code must be a non-empty string or list of strings")
        for i, snippet in enumerate(snippets):
            if not snippet.strip():
                raise InvalidTests(f"assert_code {i} is empty")
            try:
                compile(snippet, "<tests>", "exec")
            except (SyntaxError, ValueError) as exc:
                raise InvalidTests(f"assert_code {i} does not compile: {exc}") from None
        return TestSuite(ASSERT, tuple(snippets), None)

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
            except ValueError:
                raise InvalidTests(f"output {i} is not JSON") from None
        return TestSuite(CALL, args, tuple(expected), fn_name)
    for i, x in enumerate(inputs):
        if not isinstance(x, list):
            raise InvalidTests(f"input {i} must be the argument list, got {type(x).__name__}")
    return TestSuite(CALL, tuple(inputs), tuple(outputs), fn_name)


def sample_indices(n: int, k: int, seed: int, key: Any) -> list[int]:
    """Up to k of range(n), in order; the same (seed, key) always picks the same tests."""
    if k <= 0 or n <= k:
        return list(range(n))
    return sorted(random.Random(f"{seed}:{key}").sample(range(n), k))

"""A hostile mixed corpus for curation tests: every row's expected fate is declared next to it."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

INSTR = "Give the final answer in \\boxed{}."

BENCH = [
    "Let a and b be positive integers such that the least common multiple of a and b is 360 and their "
    "greatest common divisor is 12. Find the number of ordered pairs (a, b) that satisfy these conditions.",
    "A bag contains five red marbles, seven blue marbles and eight green marbles. Two marbles are drawn "
    "without replacement. What is the probability that both drawn marbles have the same colour?",
    "Find the remainder when the sum of the squares of the first one hundred positive integers is divided "
    "by seventeen, showing that your method works for any modulus.",
]

LONG = ("A farmer plants trees in a rectangular grid with eleven rows and thirteen columns, then removes every "
        "tree that lies on the boundary of the grid and replants half of the removed trees along a diagonal "
        "path. How many trees are standing in the field after the replanting is finished?")

# (row payload or raw line, expected reason or "kept")
JSONL_ROWS = [
    ({"problem": f"{LONG} {INSTR}", "answer": "105", "response": "<think>count</think> \\boxed{105}"}, "kept"),
    ({"problem": f"Solve 3x+5=11 for x. {INSTR}", "answer": "2"}, "kept"),
    ({"problem": f"Solve 7x+2=9 for x. {INSTR}", "answer": "1"}, "kept"),
    ("this line is not json", "malformed"),
    ([1, 2, 3], "malformed"),
    ({"problem": "   "}, "malformed"),
    ({"problem": "Prove it.", "domain": "biology"}, "malformed"),
    ({"problem": "Write add.", "domain": "code", "tests": "{oops"}, "malformed"),
    ({"problem": f"Here is a question from a contest. {BENCH[0]} {INSTR}"}, "contaminated"),
    ({"problem": f"Quick one: find the number of ordered pairs of primes below ten. {INSTR}"}, "kept"),
    ({"problem": f"Warm-up: {LONG} {INSTR}"}, "near_duplicate"),
    ({"problem": "Write a function add(a, b) that returns the sum of a and b.", "domain": "code",
      "tests": {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]},
      "response": "<think>easy</think>\n```python\ndef add(a, b):\n    return a + b\n```"}, "kept"),
]

PARQUET_ROWS = [
    ({"question": f"  solve 3X+5=11   FOR x.  {INSTR} ", "answer": "2"}, "duplicate"),
    ({"question": f"Consider this carefully. {BENCH[1]} {INSTR}"}, "contaminated"),
    ({"question": f"{LONG} Explain briefly. {INSTR}"}, "near_duplicate"),
    ({"question": f"Compute the product of the first five primes and report the digit sum of the result. {INSTR}",
      "answer": "13"}, "kept"),
]


def write_corpus(tmp: Path) -> dict[str, Path]:
    tmp.mkdir(parents=True, exist_ok=True)
    jl = tmp / "a.jsonl"
    with jl.open("w") as f:
        for payload, _ in JSONL_ROWS:
            f.write((payload if isinstance(payload, str) else json.dumps(payload)) + "\n")
    pqf = tmp / "b.parquet"
    pq.write_table(pa.Table.from_pylist([p for p, _ in PARQUET_ROWS]), pqf)
    bench = tmp / "bench.jsonl"
    bench.write_text("".join(json.dumps({"problem": f"{b} {INSTR}", "answer": "0"}) + "\n" for b in BENCH))
    return {"a": jl, "b": pqf, "bench": bench}


def expected() -> dict[tuple[str, int], str]:
    out = {("a", i + 1): r for i, (_, r) in enumerate(JSONL_ROWS)}
    out.update({("b", i + 1): r for i, (_, r) in enumerate(PARQUET_ROWS)})
    return out

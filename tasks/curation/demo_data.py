"""Bundled demo data: a seeded generator of small math and code sources, with curation hazards planted in
known rows, and the held-out benchmarks the demo evaluates on.

    python -m tasks.curation.demo_data OUT_DIR [--seed S] [--scale X]

Files (`write_demo_sources` returns their paths as `DemoFiles`):

- `math_chain.jsonl`  canonical rows {problem, domain="math", response, answer}.
- `math_qa.parquet`   the same task in another layout: {question, solution, final_answer}, no domain column
                      (curation maps question→problem, solution→response, final_answer→answer; domain
                      defaults to math because the row has no tests).
- `code.jsonl`        canonical rows {problem, domain="code", response, tests}, tests in all three forms.
- `bench_math.jsonl`  {problem, domain, answer}; `bench_code.jsonl` {problem, domain, tests}.
- `manifest.json`     what every non-plain row is (1-based row numbers, as curation's `dropped.row`), the
                      expected drop counts, the knobs used. Tests and later stages read it.

Every math prompt, training and benchmark alike, ends with the fixed sentence `INSTRUCTION`.

## The math task and its curriculum (later stages rely on this)
Problems are short word problems over a running count: "Mia has 12 marbles. She finds 7 more. Then she
gives away 5. How many marbles does Mia have now?" The teacher response walks one operation per line
(`She finds 7 more: 12 + 7 = 19.`), then `</think>` and `The answer is \\boxed{14}.` Prompt and response
are ~30-60 BPE tokens each: CPU training cost grows with every token, prompt tokens included.

Why this task:
- A tiny random-init model (~1-5M parameters, minutes of CPU) can learn it: each line copies one
  operation from the prompt (an induction-head pattern a 2-layer model learns) and applies one fact from a
  small table (operands 2..`max_operand`, totals 0..`max_total`: a few hundred facts, each seen many times
  per epoch whatever the tokenizer does with numbers; a tokenizer that splits digits helps further).
- Base (random init) scores ~0%: the answer must be an exact integer inside \\boxed{}.
- After SFT it is right often but not always: every step is a chance for an arithmetic or copying slip, so
  accuracy falls with the number of operations (`min_ops`..`max_ops`).
- RL has headroom that reward alone can find. Following the paper's finding that incorrect teacher
  responses are worth keeping on hard problems, a share `flaw_rate` of the *hard* training problems
  (>= `hard_ops` operations) carries a flawed teacher response that stops one step early and boxes the
  running total before the last operation ("flawed" rows in the manifest; `answer` is always the true
  answer). SFT imitates this: on hard problems the model ends early about `flaw_rate` of the time, and
  because the choice is one decision (write the next step or "So ..."), sampling at temperature 1 finds
  both branches often. The reward separates them perfectly (early stop is always wrong), so GPPO can
  remove the flaw in tens of steps; that alone is worth about flaw_rate x (share of hard problems) x
  (accuracy on hard problems) on the benchmark, on top of what reward feedback does to the slips.
  Keep `flaw_rate` <= 0.5: sampling at temperature < 1 sharpens a majority choice, so above 0.5 the
  evaluation would see the flaw more often than the data has it.
- How these parameters were chosen (a scratch probe's SFT and RL curves): docs/benchmarks.md.
- The benchmark draws from the same distribution (same templates, same difficulty mix) but its number
  sequences never occur in training and no training problem shares a 7-word phrase with it, so held-out
  avg@k measures the skill, not memory.

## Hazards (expected curation outcome in `manifest.json["expected_dropped"]`)
Curation keeps the earlier of two rows; sources are meant to be given in the order math_chain, math_qa,
code (`DemoFiles.sources()`), and every copy lies after its original.
- duplicate: math_qa copies of math_chain problems with case and whitespace changed (NFKC + case-fold +
  whitespace collapse makes them equal), and one code problem copied later in code.jsonl.
- near_duplicate: long (max_ops) math_chain problems repeated in math_qa with a short lead-in or a
  trailing "Thanks!" (word-shingle Jaccard >= 0.85 for shingles of 1..5 words), and one code problem
  with an added sentence.
- contaminated: a benchmark problem after a different lead-in (two in math_chain, one in math_qa, one in
  code.jsonl). Each benchmark code problem opens with its own story sentence (`STORIES`), so its text
  is not all template.
- malformed: in math_chain a line that is not JSON, a JSON array, an empty problem, an unknown domain; in
  math_qa an empty question; in code.jsonl two rows whose tests are unparsable JSON text.
Plain rows are far from each other (word-trigram Jaccard < 0.5 between bodies of the same template and
item; < 0.65 between any two full prompts, for 3- and 5-word shingles) and from the benchmark (no shared
7-word phrase in the body), so none of them is dropped: a near-duplicate detector over word shingles of
>= 3 words at Jaccard ~0.8 and 9-gram decontamination that ignores the instruction sentence (and n-grams
straddling it) keep them all.

## Code rows (the verify stage's hazards, `manifest.json["expected_verify_dropped"]`)
Each response is `<think>…</think>` and a ```python block with the reference solution. Plain problems have
16-20 tests. `too_few_tests`: a few stdin/call-based problems with 3-8 tests. `invalid_tests`: one
`count_multiples` problem (its reference loops over `range(1, n)` and misses n itself) and one
`count_two_letters` problem (its reference counts only the first letter), both with >= 16 tests. The
manifest lists their rows. Assert tests are one `assert` per line, so a verifier counts them by line.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

INSTRUCTION = "Give the final answer in \\boxed{}."
MATH_QA_LAYOUT = {"question": "problem", "solution": "response", "final_answer": "answer"}


@dataclass(frozen=True)
class MathSpec:
    """Difficulty knobs of the math task (module docstring: why these defaults)."""
    min_ops: int = 1           # operations per problem; k operations = k CoT steps
    max_ops: int = 4
    max_operand: int = 9       # operands 2..9: a small fact table a tiny model can learn in minutes
    max_total: int = 40        # running totals stay within 0..max_total
    hard_ops: int = 2          # problems with at least this many operations are "hard" (3 of 4 here)
    flaw_rate: float = 0.5     # share of hard training rows whose teacher stops one step early (wrong)
    train_rows: int = 3000     # plain training rows at scale 1.0: 60% math_chain.jsonl, 40% math_qa.parquet
    bench_rows: int = 80       # benchmark size (not scaled)


MIN_SCALE = 0.02  # the smallest scale: below ~0.008 the math rows cannot hold every planted case (four
#   duplicates, three near-duplicates of the longest problems), and 0.02 is the smallest pipeline the test
#   suite runs end to end (tests/flows/test_pipeline_qwen_vocab.py)
LEARNING_SCALE = 0.5  # the smallest scale whose demo pipeline learns: SFT's steps and rows shrink with the
#   scale, and below this its model solves too few problems for RL to gain on (docs/benchmarks.md, "demo
#   time and smaller scales": the figures per scale)


@dataclass(frozen=True)
class CodeSpec:
    train_rows: int = 150      # code rows at scale 1.0, including the 2 wrong references and:
    too_few_tests: int = 6     # rows with 3-8 tests (verify drops them: < 16)
    bench_rows: int = 16       # benchmark size (not scaled)


@dataclass(frozen=True)
class DemoFiles:
    out_dir: Path
    math_chain: Path
    math_qa: Path
    code: Path
    bench_math: Path
    bench_code: Path
    manifest: Path

    def sources(self) -> dict[str, Path]:
        """Training sources in the order curation should get them (earlier wins ties)."""
        return {"math_chain": self.math_chain, "math_qa": self.math_qa, "code": self.code}

    def benchmarks(self) -> dict[str, Path]:
        return {"bench_math": self.bench_math, "bench_code": self.bench_code}


# ----------------------------------------------------------------------------------------------------
# Text similarity guards (the rules the generator promises curation)

def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def ngrams(ws: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)}


def jaccard(a: set, b: set) -> float:
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter) if a or b else 1.0


def body(problem: str) -> str:
    """The problem without the fixed instruction sentence."""
    return problem.removesuffix(INSTRUCTION).rstrip()


class _Guard:
    """Rejects a candidate problem that shares a 7-word phrase with a benchmark problem or (when
    `distinct`) is close to an accepted one of the same bucket: word-trigram Jaccard >= 0.5. Buckets
    (ops and item; code template) hold the only rows that could be that close."""

    def __init__(self, bench_problems: list[str] = (), distinct: bool = True):
        self.bench = set().union(*(ngrams(words(body(p)), 7) for p in bench_problems)) if bench_problems else set()
        self.distinct = distinct
        self.buckets: dict[Any, list[set]] = {}

    def admit(self, problem: str, bucket: Any) -> bool:
        ws = words(body(problem))
        if ngrams(ws, 7) & self.bench:
            return False
        if not self.distinct:
            return True
        tri = ngrams(ws, 3)
        seen = self.buckets.setdefault(bucket, [])
        if any(jaccard(tri, t) >= 0.5 for t in seen):
            return False
        seen.append(tri)
        return True


# ----------------------------------------------------------------------------------------------------
# Math word problems

NAMES = [("Mia", "she"), ("Leo", "he"), ("Ava", "she"), ("Noah", "he"), ("Zoe", "she"), ("Omar", "he"),
         ("Lina", "she"), ("Ben", "he"), ("Ruth", "she"), ("Ivan", "he"), ("Sara", "she"), ("Tom", "he"),
         ("Nora", "she"), ("Eli", "he"), ("Maya", "she"), ("Sam", "he"), ("Ines", "she"), ("Hugo", "he"),
         ("Lucy", "she"), ("Paul", "he"), ("Emma", "she"), ("Jack", "he"), ("Rosa", "she"), ("Adam", "he"),
         ("Kira", "she"), ("Yuri", "he"), ("Alma", "she"), ("Dan", "he"), ("Vera", "she"), ("Raj", "he")]
ITEMS = ["apples", "marbles", "stickers", "coins", "books", "shells", "pencils", "cards", "stamps", "cookies",
         "balloons", "beads", "crayons", "buttons", "rocks", "toys", "candles", "tickets", "plums", "ribbons"]
# verb phrases, used in the problem and again in the CoT step; {n} is the operand
ADD = ["buys {n} more", "finds {n} more", "gets {n} more", "picks up {n} more", "is given {n} more"]
SUB = ["gives away {n}", "loses {n}", "sells {n}", "uses {n}", "gives {n} to a friend"]
OPENINGS = ["{name} has {n} {item}.", "{name} starts with {n} {item}.", "{name} owns {n} {item}."]
CONNECTORS = ["Then", "Next,", "After that,", "Later,"]
QUESTIONS = ["How many {item} does {name} have now?", "How many {item} does {name} have at the end?",
             "How many {item} does {name} have left?"]


@dataclass
class MathItem:
    problem: str
    response: str
    answer: str
    numbers: tuple          # (start, (sign, n), ...): the arithmetic, for disjointness checks
    ops: int
    item: str
    flawed: bool = False


def _numbers(rng: random.Random, spec: MathSpec, ops: int) -> tuple:
    total = rng.randint(spec.max_operand, spec.max_total)
    seq: list = [total]
    for _ in range(ops):
        choices = [s for s in "+-" if (total + 2 if s == "+" else total - 2) in range(0, spec.max_total + 1)]
        sign = rng.choice(choices)
        room = spec.max_total - total if sign == "+" else total
        n = rng.randint(2, min(spec.max_operand, room))
        total = total + n if sign == "+" else total - n
        seq.append((sign, n))
    return tuple(seq)


def _math_item(rng: random.Random, numbers: tuple, flawed: bool) -> MathItem:
    name, pron = rng.choice(NAMES)
    item = rng.choice(ITEMS)
    start, steps = numbers[0], numbers[1:]
    sentences = [rng.choice(OPENINGS).format(name=name, n=start, item=item)]
    lines = [f"{name} starts with {start}."]
    total = boxed = start
    for i, (sign, n) in enumerate(steps):
        verb = rng.choice(ADD if sign == "+" else SUB).format(n=n)
        lead = pron.capitalize() if i == 0 else f"{rng.choice(CONNECTORS)} {pron}"
        sentences.append(f"{lead} {verb}.")
        new = total + n if sign == "+" else total - n
        if not (flawed and i == len(steps) - 1):   # the flawed teacher stops before the last operation
            lines.append(f"{pron.capitalize()} {verb}: {total} {sign} {n} = {new}.")
            boxed = new
        total = new
    sentences.append(rng.choice(QUESTIONS).format(item=item, name=name))
    lines.append(f"So {name} has {boxed} {item}.")
    problem = " ".join(sentences) + " " + INSTRUCTION
    response = "<think>\n" + "\n".join(lines) + "\n</think>\nThe answer is \\boxed{" + str(boxed) + "}."
    return MathItem(problem, response, str(total), numbers, len(steps), item, flawed)


def _math_items(rng: random.Random, spec: MathSpec, count: int, guard: _Guard, reserved: set,
                flaws: bool) -> list[MathItem]:
    """`count` problems, ops uniform in min_ops..max_ops, number sequences not in `reserved`."""
    out: list[MathItem] = []
    for k in range(count):
        ops = spec.min_ops + k % (spec.max_ops - spec.min_ops + 1)
        flawed = flaws and ops >= spec.hard_ops and rng.random() < spec.flaw_rate
        for _ in range(1000):
            numbers = _numbers(rng, spec, ops)
            if numbers in reserved:
                continue
            it = _math_item(rng, numbers, flawed)
            if guard.admit(it.problem, (ops, it.item)):
                out.append(it)
                break
        else:
            raise RuntimeError(f"could not draw a new {ops}-operation problem: widen max_total/max_operand")
    rng.shuffle(out)
    return out


# ----------------------------------------------------------------------------------------------------
# Code problems. A template draws parameters and returns the problem, the tests and the reference.

@dataclass
class CodeItem:
    template: str
    problem: str
    tests: dict
    solution: str
    think: str

    def response(self) -> str:
        return f"<think>\n{self.think}\n</think>\n```python\n{self.solution}\n```"


FUNC_WORDS = ["calc", "solve", "value", "compute", "rule", "apply", "measure", "score", "result", "answer"]
INPUT_PAIR = ["Standard input holds two integers a and b on one line.",
              "The input is one line with two integers a and b.",
              "You are given two integers a and b, separated by a space, on standard input."]
INPUT_N = ["The input is a single integer n (1 <= n <= 1000).", "Standard input contains one integer n, 1 <= n <= 1000.",
           "You are given an integer n between 1 and 1000 on one line."]
INPUT_LIST = ["The input is one line of space-separated integers.", "Standard input holds a list of integers on one line.",
              "You are given several integers separated by spaces."]


def _fname(rng: random.Random) -> str:
    return f"{rng.choice(FUNC_WORDS)}_{rng.choice(FUNC_WORDS)}_{rng.randint(1, 99)}"


def _stdin(fn: Callable[[str], str], inputs: list[str]) -> dict:
    return {"inputs": inputs, "outputs": [fn(x) for x in inputs]}


def _call(name: str, fn: Callable, args: list[list]) -> dict:
    return {"fn_name": name, "inputs": args, "outputs": [fn(*a) for a in args]}


def _asserts(name: str, fn: Callable, args: list[list]) -> dict:
    return {"assert_code": "\n".join(f"assert {name}({', '.join(map(repr, a))}) == {fn(*a)!r}" for a in args)}


def t_pair_linear(rng, n_tests, wrong=False):
    p, q = rng.randint(2, 9), rng.randint(2, 9)
    a, b = rng.randint(-9, 20), rng.randint(-9, 20)
    problem = (f"{rng.choice(INPUT_PAIR)} Print {p} * a + {q} * b. "
               f"For example, for the input {a} {b} the output is {p * a + q * b}.")
    ins = [f"{rng.randint(-50, 50)} {rng.randint(-50, 50)}\n" for _ in range(n_tests)]
    tests = _stdin(lambda s: f"{p * int(s.split()[0]) + q * int(s.split()[1])}\n", ins)
    sol = f"a, b = map(int, input().split())\nprint({p} * a + {q} * b)"
    return CodeItem("pair_linear", problem, tests, sol, f"Read a and b, print {p}*a + {q}*b.")


def t_count_multiples(rng, n_tests, wrong=False):
    k, m = rng.sample([2, 3, 4, 5, 6, 7, 9, 11], 2)
    e, g = rng.randint(20, 499), rng.randint(500, 999)
    count = lambda n: sum(1 for i in range(1, n + 1) if i % k == 0 and i % m != 0)
    task = rng.choice([f"Print how many of the integers 1, 2, ..., n are divisible by {k} but not by {m}.",
                       f"Count the i with 1 <= i <= n such that {k} divides i and {m} does not; print the count.",
                       f"Output the number of multiples of {k} from 1 to n, inclusive, that are no multiple of {m}."])
    problem = f"{rng.choice(INPUT_N)} {task} Examples: n = {e} gives {count(e)}, n = {g} gives {count(g)}."
    ins = [f"{k * rng.randint(1, 1000 // k)}\n" if i % 2 else f"{rng.randint(1, 1000)}\n" for i in range(n_tests)]
    tests = _stdin(lambda s: f"{count(int(s))}\n", ins)
    stop = "n" if wrong else "n + 1"
    sol = f"n = int(input())\nprint(sum(1 for i in range(1, {stop}) if i % {k} == 0 and i % {m} != 0))"
    think = f"Loop i over 1..n, count i % {k} == 0 and i % {m} != 0. n <= 1000, a loop is fast enough."
    return CodeItem("count_multiples", problem, tests, sol, think)


def t_list_threshold(rng, n_tests, wrong=False):
    k = rng.randint(-5, 30)
    rel, op = rng.choice([("greater than", ">"), ("smaller than", "<"), ("at least", ">="), ("at most", "<=")])
    ex = [rng.randint(-9, 40) for _ in range(rng.randint(3, 6))]
    f = lambda xs: sum(x for x in xs if eval(f"{x} {op} {k}"))
    problem = (f"{rng.choice(INPUT_LIST)} Print the sum of the numbers that are {rel} {k}. "
               f"For example, for {' '.join(map(str, ex))} print {f(ex)}.")
    lists = [[rng.randint(-20, 50) for _ in range(rng.randint(1, 12))] + [k] * (i % 3 == 0) for i in range(n_tests)]
    tests = _stdin(lambda s: f"{f(list(map(int, s.split())))}\n", [" ".join(map(str, xs)) + "\n" for xs in lists])
    sol = f"xs = list(map(int, input().split()))\nprint(sum(x for x in xs if x {op} {k}))"
    return CodeItem("list_threshold", problem, tests, sol, f"Sum the numbers x with x {op} {k}.")


def t_replace_letter(rng, n_tests, wrong=False):
    c, d = rng.sample("abcdefghijklmnopqrstuvwxyz", 2)
    ex = "".join(rng.choice(f"{c}{c}xyzmno") for _ in range(rng.randint(5, 9)))
    problem = (f"Read one line of lowercase letters and print it with every '{c}' replaced by '{d}'. "
               f"For example, {ex} becomes {ex.replace(c, d)}.")
    ins = ["".join(rng.choice(f"{c}{c}{d}abcdefgh") for _ in range(rng.randint(1, 15))) + "\n" for _ in range(n_tests)]
    tests = _stdin(lambda s: s.strip().replace(c, d) + "\n", ins)
    sol = f"print(input().strip().replace({c!r}, {d!r}))"
    return CodeItem("replace_letter", problem, tests, sol, f"str.replace({c!r}, {d!r}) on the stripped line.")


def t_linear_fn(rng, n_tests, wrong=False):
    name, a, b, e = _fname(rng), rng.randint(2, 12), rng.randint(-20, 20), rng.randint(-9, 9)
    problem = f"Write a function {name}(x) that returns {a} * x + {b}. For example, {name}({e}) returns {a * e + b}."
    tests = _call(name, lambda x: a * x + b, [[rng.randint(-100, 100)] for _ in range(n_tests)])
    sol = f"def {name}(x):\n    return {a} * x + {b}"
    return CodeItem("linear_fn", problem, tests, sol, f"One line: return {a} * x + {b}.")


def t_count_two_letters(rng, n_tests, wrong=False):
    name, (c, d) = _fname(rng), rng.sample("abcdefghijklmnopqrstuvwxyz", 2)
    ex = "".join(rng.choice(f"{c}{d}uvw") for _ in range(rng.randint(4, 8)))
    f = lambda s: sum(ch in (c, d) for ch in s)
    problem = (f"Write a function {name}(s) that returns how many characters of the string s are '{c}' "
               f"or '{d}'. For example, {name}('{ex}') returns {f(ex)}.")
    strings = ["".join(rng.choice(f"{c}{d}{d}pqrs") for _ in range(rng.randint(0, 12))) for _ in range(n_tests)]
    tests = _call(name, f, [[s] for s in strings])
    cond = f"ch == {c!r}" if wrong else f"ch in ({c!r}, {d!r})"
    sol = f"def {name}(s):\n    return sum(1 for ch in s if {cond})"
    return CodeItem("count_two_letters", problem, tests, sol, f"Count characters equal to {c!r} or {d!r}.")


def t_clamp(rng, n_tests, wrong=False):
    name, lo = _fname(rng), rng.randint(-30, 10)
    hi = lo + rng.randint(5, 40)
    problem = (f"Write a function {name}(x) that returns x limited to the range from {lo} to {hi}: "
               f"values below {lo} become {lo} and values above {hi} become {hi}.")
    tests = _call(name, lambda x: max(lo, min(hi, x)), [[rng.randint(lo - 30, hi + 30)] for _ in range(n_tests)])
    sol = f"def {name}(x):\n    return max({lo}, min({hi}, x))"
    return CodeItem("clamp", problem, tests, sol, f"max({lo}, min({hi}, x)) clamps x.")


def t_solution_divisible(rng, n_tests, wrong=False):
    name, k = _fname(rng), rng.randint(2, 9)
    ex = [rng.randint(0, 60) for _ in range(rng.randint(3, 6))]
    f = lambda nums: sum(1 for x in nums if x % k == 0)
    problem = (f"Implement class Solution with a method {name}(self, nums) that returns how many elements of "
               f"the list nums are divisible by {k}. For example, for nums = {ex} it returns {f(ex)}.")
    tests = _call(name, f, [[[rng.randint(-40, 90) for _ in range(rng.randint(0, 10))]] for _ in range(n_tests)])
    sol = f"class Solution:\n    def {name}(self, nums):\n        return sum(1 for x in nums if x % {k} == 0)"
    return CodeItem("solution_divisible", problem, tests, sol, f"Count x with x % {k} == 0.")


def t_multiple_or_digit(rng, n_tests, wrong=False):
    name, k, d, e = _fname(rng), rng.randint(3, 13), rng.randint(0, 9), rng.randint(10, 500)
    f = lambda n: n % k == 0 or n % 10 == d
    task = rng.choice([f"returns True when the non-negative integer n is divisible by {k} or its last digit is "
                       f"{d}, and False otherwise",
                       f"tells (True or False) whether n is a multiple of {k} or ends in the digit {d}; n >= 0",
                       f"checks if n % {k} == 0 or the units digit of n equals {d} and returns that bool"])
    problem = f"Write a function {name}(n) that {task}. For example, {name}({e}) returns {f(e)}."
    tests = _asserts(name, f, [[rng.randint(0, 500)] for _ in range(n_tests)])
    sol = f"def {name}(n):\n    return n % {k} == 0 or n % 10 == {d}"
    return CodeItem("multiple_or_digit", problem, tests, sol, f"Check n % {k} == 0 or n % 10 == {d}.")


def t_digit_sum(rng, n_tests, wrong=False):
    name, k, e = _fname(rng), rng.randint(2, 9), rng.randint(10, 99999)
    f = lambda n: k * sum(map(int, str(n)))
    task = rng.choice([f"returns {k} times the sum of the decimal digits of the non-negative integer n",
                       f"adds up the digits of n (n >= 0) and returns that sum multiplied by {k}",
                       f"computes digit_sum(n) * {k}, where digit_sum is the sum of the base-10 digits of n >= 0"])
    problem = f"Write a function {name}(n) that {task}. For example, {name}({e}) returns {f(e)}."
    tests = _asserts(name, f, [[rng.randint(0, 10 ** rng.randint(1, 6))] for _ in range(n_tests)])
    sol = f"def {name}(n):\n    return {k} * sum(int(c) for c in str(n))"
    return CodeItem("digit_sum", problem, tests, sol, f"Sum the digits of str(n), multiply by {k}.")


def t_repeat_join(rng, n_tests, wrong=False):
    name, k, sep = _fname(rng), rng.randint(2, 5), rng.choice(["-", "+", ",", ":", "/", "|", "."])
    f = lambda s: sep.join([s] * k)
    ex = "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 4)))
    task = rng.choice([f"returns the string s repeated {k} times with '{sep}' between the copies",
                       f"joins {k} copies of the string s, putting '{sep}' between neighbours",
                       f"builds '{sep}'.join of a list holding s {k} times and returns it"])
    problem = f"Write a function {name}(s) that {task}, so {name}('{ex}') returns '{f(ex)}'."
    tests = _asserts(name, f, [["".join(rng.choice("xyzuvw") for _ in range(rng.randint(0, 5)))] for _ in range(n_tests)])
    sol = f"def {name}(s):\n    return {sep!r}.join([s] * {k})"
    return CodeItem("repeat_join", problem, tests, sol, f"{sep!r}.join of {k} copies of s.")


TRAIN_TEMPLATES = [t_pair_linear, t_count_multiples, t_list_threshold, t_replace_letter, t_linear_fn,
                   t_count_two_letters, t_clamp, t_solution_divisible, t_multiple_or_digit, t_digit_sum,
                   t_repeat_join]
WRONG_TEMPLATES = (t_count_multiples, t_count_two_letters)   # first instance of each: wrong reference
FEW_TESTS_TEMPLATES = (t_pair_linear, t_list_threshold, t_replace_letter, t_linear_fn, t_clamp,
                       t_solution_divisible)                  # stdin/call-based: test count is unambiguous


# Benchmark templates: worded differently from every training template, so they share no 7-word phrase.
def b_square_minus(rng, n_tests, wrong=False):
    k, e = rng.randint(1, 50), rng.randint(2, 12)
    problem = f"Input: one integer x. Output: x squared minus {k}. Example: x = {e} gives {e * e - k}."
    tests = _stdin(lambda s: f"{int(s) ** 2 - k}\n", [f"{rng.randint(-30, 30)}\n" for _ in range(n_tests)])
    return CodeItem("square_minus", problem, tests, f"x = int(input())\nprint(x * x - {k})", "x*x - k.")


def b_max_plus(rng, n_tests, wrong=False):
    name, k = f"top_{rng.randint(1, 99)}", rng.randint(1, 20)
    ex = [rng.randint(-9, 30) for _ in range(rng.randint(2, 5))]
    problem = (f"Define {name}(values) returning the largest element of values plus {k}; values is never "
               f"empty. Example: {name}({ex}) is {max(ex) + k}.")
    tests = _call(name, lambda v: max(v) + k, [[[rng.randint(-50, 50) for _ in range(rng.randint(1, 8))]] for _ in range(n_tests)])
    return CodeItem("max_plus", problem, tests, f"def {name}(values):\n    return max(values) + {k}", "max + k.")


def b_palindrome_without(rng, n_tests, wrong=False):
    name, c = f"mirror_{rng.randint(1, 99)}", rng.choice("xyz")
    f = lambda w: w.replace(c, "") == w.replace(c, "")[::-1]
    ex = rng.choice(["ab", "aba", "abba", "bab", "aab", "baab"])
    ex = "".join(ch + c * rng.randint(0, 1) for ch in ex)
    problem = (f"Define {name}(word) returning True if word reads the same forwards and backwards once every "
               f"'{c}' is deleted from it, else False. Example: {name}('{ex}') is {f(ex)}.")
    words_ = ["".join(rng.choice(f"ab{c}") for _ in range(rng.randint(0, 7))) for _ in range(n_tests)]
    tests = _asserts(name, f, [[w] for w in words_])
    sol = f"def {name}(word):\n    w = word.replace({c!r}, '')\n    return w == w[::-1]"
    return CodeItem("palindrome_without", problem, tests, sol, "strip the letter, compare with reverse.")


def b_odd_above(rng, n_tests, wrong=False):
    k = rng.randint(-10, 20)
    f = lambda s: f"{sum(1 for x in map(int, s.split()) if x % 2 and x > k)}\n"
    ex = " ".join(str(rng.randint(-20, 30)) for _ in range(rng.randint(3, 6)))
    problem = (f"Input: integers on a single line. Output: the count of those that are odd and exceed {k}. "
               f"Example: {ex} gives {f(ex).strip()}.")
    ins = [" ".join(str(rng.randint(-30, 40)) for _ in range(rng.randint(1, 10))) + "\n" for _ in range(n_tests)]
    sol = f"print(sum(1 for x in map(int, input().split()) if x % 2 and x > {k}))"
    return CodeItem("odd_above", problem, _stdin(f, ins), sol, "count odd x > k.")


BENCH_TEMPLATES = [b_square_minus, b_max_plus, b_palindrome_without, b_odd_above]
# One story sentence per benchmark code problem, as contest problems have: it makes each problem's text
# its own. Without it, four problems per template share all their words, and a decontaminator that
# treats phrases common to several benchmark problems as boilerplate could not match any of them.
STORIES = ["A lighthouse keeper writes numbers in a weathered logbook every stormy night.",
           "Village bakers compare their morning loaves before the market opens at dawn.",
           "An old robot sorts pebbles on a beach while the tide slowly rises.",
           "Two rival chess clubs exchange puzzle cards during the winter festival.",
           "A museum guard counts visitors passing beneath the giant whale skeleton.",
           "Farmers along the river trade seed packets after a long rainy season.",
           "A young astronomer records faint signals from a distant silver comet.",
           "The city orchestra tunes its instruments while the conductor checks a list.",
           "Mountain rescuers test their radios before climbing the frozen northern ridge.",
           "A clockmaker inspects tiny brass gears under a bright magnifying lamp.",
           "Students at a robotics camp feed sensor readings into a small program.",
           "A beekeeper tallies honey jars stacked beside the wooden garden shed.",
           "Sailors on a cargo ship note wave heights during the midnight watch.",
           "An archivist scans faded letters found inside a dusty attic trunk.",
           "The town librarian checks returned books against a handwritten ledger.",
           "A desert caravan guide measures distances between ancient stone wells.",
           "Engineers on a subway project label tunnel segments with painted codes.",
           "A florist arranges tulips by color for a large spring wedding order."]


def _code_items(rng: random.Random, templates: list, count: int, guard: _Guard, n_tests: Callable[[], int],
                wrong: bool = False) -> list[CodeItem]:
    """`count` problems, templates in turn; a template that yields no new distinct problem in 200 draws
    is retired and the others fill in."""
    out, live = [], list(templates)
    while len(out) < count:
        if not live:
            raise RuntimeError(f"code templates ran out of distinct problems after {len(out)}: lower the scale")
        tpl = live[len(out) % len(live)]
        for _ in range(200):
            it = tpl(rng, n_tests(), wrong)
            if guard.admit(it.problem, it.template):
                out.append(it)
                break
        else:
            live.remove(tpl)
    return out


# ----------------------------------------------------------------------------------------------------
# Assembly: plain rows, then hazards at seeded positions after their originals.

@dataclass(eq=False)   # lines are found by identity, never by equal payloads
class _Line:
    payload: Any                          # dict row, or a str written verbatim (malformed JSONL)
    kind: str = "plain"                   # plain | flawed | too_few_tests | invalid_tests | <drop reason>
    of: "_Line | None" = None             # the original of a duplicate / near duplicate
    note: str = ""


def _insert_after(rng: random.Random, lines: list[_Line], new: _Line, after: _Line | None = None) -> None:
    lo = lines.index(after) + 1 if after is not None else 0
    lines.insert(rng.randint(lo, len(lines)), new)


def _mangle(rng: random.Random, text: str) -> str:
    """Change case and whitespace of the problem body only (exact dedup must still see one problem)."""
    b = body(text)
    ws = b.split(" ")
    ws = [w.upper() if rng.random() < 0.3 else w for w in ws]
    spaced = "".join(w + rng.choice([" ", "  ", "\t", " \n "]) for w in ws[:-1]) + ws[-1]
    return f"  {spaced}   {INSTRUCTION}"


def _math_row(it: MathItem) -> dict:
    return {"problem": it.problem, "domain": "math", "response": it.response, "answer": it.answer}


def _qa_row(it: MathItem) -> dict:
    return {"question": it.problem, "solution": it.response, "final_answer": it.answer}


def _code_row(it: CodeItem, problem: str | None = None) -> dict:
    return {"problem": problem or it.problem, "domain": "code", "response": it.response(), "tests": it.tests}


def build_demo(seed: int = 0, scale: float = 1.0, math: MathSpec = MathSpec(), code: CodeSpec = CodeSpec()):
    """All rows in memory: ({file name: [_Line]}, bench_math rows, bench_code rows). Deterministic in
    (seed, scale, math, code)."""
    rng = random.Random(f"demo:{seed}")
    # benchmarks first: the training draw avoids their number sequences and phrases
    bench_m = _math_items(random.Random(f"bench_math:{seed}"), math, math.bench_rows, _Guard(), set(), flaws=False)
    bench_c = _code_items(random.Random(f"bench_code:{seed}"), BENCH_TEMPLATES, code.bench_rows,
                          _Guard(distinct=False), lambda: 16)
    if len(bench_c) > len(STORIES):
        raise ValueError(f"bench_code has {len(bench_c)} rows but only {len(STORIES)} stories")
    for it, story in zip(bench_c, random.Random(f"stories:{seed}").sample(STORIES, len(bench_c))):
        it.problem = f"{story} {it.problem}"
    guard = _Guard([b.problem for b in bench_m] + [b.problem for b in bench_c])

    n_math = max(20, round(math.train_rows * scale))
    items = _math_items(random.Random(f"math:{seed}"), math, n_math, guard, {b.numbers for b in bench_m}, flaws=True)
    n_chain = round(n_math * 0.6)
    chain = [_Line(_math_row(it), "flawed" if it.flawed else "plain") for it in items[:n_chain]]
    qa = [_Line(_qa_row(it), "flawed" if it.flawed else "plain") for it in items[n_chain:]]
    by_line = {id(line): it for line, it in zip(chain, items)}

    crng = random.Random(f"code:{seed}")
    n_code = max(len(TRAIN_TEMPLATES) + 2, round(code.train_rows * scale))
    n_few = min(code.too_few_tests, len(FEW_TESTS_TEMPLATES))
    code_items = (_code_items(crng, list(WRONG_TEMPLATES), 2, guard, lambda: crng.randint(16, 20), wrong=True)
                  + _code_items(crng, list(FEW_TESTS_TEMPLATES), n_few, guard, lambda: crng.randint(3, 8))
                  + _code_items(crng, TRAIN_TEMPLATES, n_code - 2 - n_few, guard, lambda: crng.randint(16, 20)))
    kinds = ["invalid_tests"] * 2 + ["too_few_tests"] * n_few + ["plain"] * (n_code - 2 - n_few)
    code_lines = [_Line(_code_row(it), k) for it, k in zip(code_items, kinds)]
    crng.shuffle(code_lines)

    # duplicates: math_chain problems copied into math_qa with case/whitespace changes; one in code
    plain_chain = [line for line in chain if line.kind == "plain"]
    for orig in rng.sample(plain_chain, 4):
        it = by_line[id(orig)]
        _insert_after(rng, qa, _Line({**_qa_row(it), "question": _mangle(rng, it.problem)}, "duplicate", orig))
    plain_code = [line for line in code_lines if line.kind == "plain"]
    orig = plain_code[0]
    _insert_after(rng, code_lines, _Line({**orig.payload, "problem": orig.payload["problem"].upper()}, "duplicate", orig), orig)

    # near duplicates: long problems with a short lead-in or closing sentence
    longest = [line for line in plain_chain if by_line[id(line)].ops == math.max_ops]
    for text, orig in zip(["Quick question. {}", "Homework: {}", "{} Thanks!"], rng.sample(longest, 3)):
        it = by_line[id(orig)]
        text = text.format(it.problem)
        _insert_after(rng, qa, _Line({**_qa_row(it), "question": text}, "near_duplicate", orig))
    orig = max(plain_code[1:], key=lambda line: len(line.payload["problem"]))
    _insert_after(rng, code_lines, _Line({**orig.payload, "problem": orig.payload["problem"] + " Keep it simple."},
                                         "near_duplicate", orig), orig)

    # contaminated: a benchmark problem after a different lead-in
    for i, b in enumerate(rng.sample(bench_m, 3)):
        row = {"problem": f"Here is one from my homework sheet. {b.problem}", "domain": "math",
               "response": b.response, "answer": b.answer}
        if i < 2:
            _insert_after(rng, chain, _Line(row, "contaminated"))
        else:
            _insert_after(rng, qa, _Line({"question": row["problem"], "solution": row["response"],
                                          "final_answer": row["answer"]}, "contaminated"))
    b = rng.choice(bench_c)
    _insert_after(rng, code_lines, _Line(_code_row(b, f"A task from an old contest. {b.problem}"), "contaminated"))

    # malformed
    good = by_line[id(plain_chain[0])]
    for raw, note in [(json.dumps(_math_row(good))[:-25], "not JSON (truncated line)"),
                      (json.dumps([good.problem, good.answer]), "JSON array, not an object"),
                      ({**_math_row(good), "problem": ""}, "empty problem"),
                      ({**_math_row(good), "problem": "What is the boiling point of water at sea level in "
                        "kelvin?", "domain": "chemistry", "answer": "373"}, "unknown domain")]:
        _insert_after(rng, chain, _Line(raw, "malformed", note=note))
    _insert_after(rng, qa, _Line({"question": "", "solution": good.response, "final_answer": good.answer},
                                 "malformed", note="empty problem"))
    for problem, bad in [("Read two integers and print their sum.", '{"inputs": ["1 2\\n"], "outputs": ['),
                         ("Read two integers and print their product.", "inputs=1 2, outputs=2")]:
        op = "+" if "sum" in problem else "*"
        row = {"problem": problem, "domain": "code", "tests": bad, "response":
               f"<think>\nRead a and b.\n</think>\n```python\na, b = map(int, input().split())\nprint(a {op} b)\n```"}
        _insert_after(rng, code_lines, _Line(row, "malformed", note="tests: unparsable JSON text"))

    bench_math_rows = [{"problem": b.problem, "domain": "math", "answer": b.answer} for b in bench_m]
    bench_code_rows = [{"problem": b.problem, "domain": "code", "tests": b.tests} for b in bench_c]
    return {"math_chain": chain, "math_qa": qa, "code": code_lines}, bench_math_rows, bench_code_rows


# ----------------------------------------------------------------------------------------------------
# Writing

def _write_if_changed(path: Path, data: bytes) -> None:
    """Leave a file that already holds these bytes untouched (a rerun changes nothing on disk)."""
    if path.exists() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _write_jsonl(path: Path, rows: list) -> None:
    _write_if_changed(path, "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                                    for r in rows).encode("utf-8"))


def _manifest(files: dict[str, list[_Line]], seed: int, scale: float, math: MathSpec, code: CodeSpec,
              bench_sizes: dict[str, int]) -> dict:
    where = {id(line): (name, i) for name, lines in files.items() for i, line in enumerate(lines, start=1)}
    rows = []
    for name, lines in files.items():
        for i, line in enumerate(lines, start=1):
            if line.kind != "plain":
                entry = {"source": name, "row": i, "kind": line.kind}
                if line.of is not None:
                    entry["of"] = {"source": where[id(line.of)][0], "row": where[id(line.of)][1]}
                if line.note:
                    entry["note"] = line.note
                rows.append(entry)
    count = lambda kinds: {k: sum(r["kind"] == k for r in rows) for k in kinds}
    return {
        "seed": seed, "scale": scale, "math_spec": asdict(math), "code_spec": asdict(code),
        "instruction": INSTRUCTION,
        "sources": {"math_chain": {"path": "math_chain.jsonl", "layout": "canonical"},
                    "math_qa": {"path": "math_qa.parquet", "layout": "canonical", "field_map": MATH_QA_LAYOUT},
                    "code": {"path": "code.jsonl", "layout": "canonical"}},
        "benchmarks": {"bench_math": "bench_math.jsonl", "bench_code": "bench_code.jsonl"},
        "row_counts": {name: len(lines) for name, lines in files.items()} | bench_sizes,
        "expected_dropped": count(["malformed", "duplicate", "near_duplicate", "contaminated"]),
        "expected_verify_dropped": count(["too_few_tests", "invalid_tests"]),
        "flawed_math": count(["flawed"])["flawed"],
        "rows": rows,   # every row that is not plain: 1-based row numbers, as curation's dropped.row
    }


def write_demo_sources(out_dir: Path, seed: int = 0, scale: float = 1.0, math: MathSpec = MathSpec(),
                       code: CodeSpec = CodeSpec()) -> DemoFiles:
    """Write the demo sources, benchmarks and manifest into `out_dir`; same arguments → same bytes."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files, bench_m, bench_c = build_demo(seed, scale, math, code)
    d = DemoFiles(out_dir, out_dir / "math_chain.jsonl", out_dir / "math_qa.parquet", out_dir / "code.jsonl",
                  out_dir / "bench_math.jsonl", out_dir / "bench_code.jsonl", out_dir / "manifest.json")
    _write_jsonl(d.math_chain, [line.payload for line in files["math_chain"]])
    _write_jsonl(d.code, [line.payload for line in files["code"]])
    qa = [line.payload for line in files["math_qa"]]
    table = pa.table({k: pa.array([r[k] for r in qa], pa.string()) for k in MATH_QA_LAYOUT})
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf, compression="zstd")
    _write_if_changed(d.math_qa, buf.getvalue().to_pybytes())
    _write_jsonl(d.bench_math, bench_m)
    _write_jsonl(d.bench_code, bench_c)
    manifest = _manifest(files, seed, scale, math, code, {"bench_math": len(bench_m), "bench_code": len(bench_c)})
    _write_if_changed(d.manifest, (json.dumps(manifest, indent=1) + "\n").encode("utf-8"))
    return d


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tasks.curation.demo_data", description="Write the bundled demo sources, benchmarks and manifest into OUT_DIR.")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the training row counts")
    args = ap.parse_args(argv)
    if not args.scale >= MIN_SCALE:
        ap.error(f"--scale must be at least {MIN_SCALE} (got {args.scale})")
    t0 = time.perf_counter()
    d = write_demo_sources(args.out_dir, args.seed, args.scale)
    counts = json.loads(d.manifest.read_text())["row_counts"]
    for name, path in {**d.sources(), **d.benchmarks()}.items():
        print(f"{name:11s} {counts[name]:6d} rows  {path.stat().st_size:9d} B  {path}")
    print(f"{'manifest':11s} {'':6s}       {d.manifest.stat().st_size:9d} B  {d.manifest}")
    print(f"written in {time.perf_counter() - t0:.2f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

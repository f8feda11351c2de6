"""Source layouts: how the fields of a public dataset's rows map onto the canonical schema (schema.py).

One registry (`LAYOUTS`, `--layout NAME=LAYOUT`); each entry maps one raw row to a row with canonical
field names, its mapping rule in its docstring. A source may add its own `field_map` ({raw field:
canonical field}) on top, applied first (`--map`); a raw field is named as the layouts name one, by key
or by the dotted path into nested objects (`--map mine.data.question=problem`: `field_at`).

What every layout does the same way:
- a required field that is absent or null raises Malformed `layout NAME: missing field 'FIELD'`
  (nested fields by their dotted path, `reward_model.ground_truth`); a field of the wrong shape names
  itself too. The pipeline records the row as `malformed` with that reason and its row number; it is
  never lost. An error no rule foresaw is still one malformed row naming the layout (`apply_layout`).
- rows with several reference solutions keep them all in `solutions`; `response` is the first.
  Code solutions are ```python blocks, as a response would hold them.
- chat-message lists (`role`/`content` or `from`/`value` turns) give the first user turn as `problem`
  and the assistant turn after it as `response`.
- tests held in separate columns or nested JSON become one canonical tests form (stdin/stdout,
  call-based `fn_name`, assert-style `assert_code`).
- a dataset's own metadata lands in `meta` (its `source` as `origin`, since `source` is the name given
  with --source); a contest date lands in `date` (ISO `YYYY-MM-DD`).
- `starter_code`, when a code problem has one, is appended to the problem as a ```python block: a
  call-based problem cannot be solved without the signature it names.
"""
from __future__ import annotations

import ast
import base64
import binascii
import io
import json
import math
import pickle
import zlib
from typing import Any, Callable, Mapping

from tasks.curation.malformed import InvalidTestsRow, Malformed, MissingField, iso_date
from tasks.grading.math_answers import last_boxed

Layout = Callable[[Mapping[str, Any]], dict[str, Any]]
LAYOUTS: dict[str, Layout] = {}

_ALIASES = {
    "problem": ("question", "prompt"),
    "response": ("solution",),
    "answer": ("final_answer", "ground_truth"),
    "tests": ("input_output",),
}
# raw field → (the layouts that read it, what the canonical layout leaves behind without one): a row read
# with the canonical layout that carries one of these is a raw dataset's row (layout_hint)
LAYOUT_HINTS: dict[str, tuple[str, str]] = {
    "generations": ("openr1-math", "its reasoning traces (SFT would train on the short `solution`)"),
    "solutions": ("taco or apps", "its reference programs"),
    "input_output": ("taco or apps", "its tests as TACO/APPS write them"),
    "conversations": ("openthoughts", "its reasoning turns"),
}
_USER_ROLES = ("user", "human")
_ASSISTANT_ROLES = ("assistant", "gpt")
MAX_DECODED_TESTS = 256 << 20  # bytes a compressed tests field may expand to (LiveCodeBench's largest
#   private tests are tens of MB); more is refused as a malformed row, not read into memory


def register_layout(name: str) -> Callable[[Layout], Layout]:
    def deco(fn: Layout) -> Layout:
        LAYOUTS[name] = fn
        return fn
    return deco


def layout_hint(row: Any) -> tuple[str, str, str] | None:
    """(field, layouts, what is lost) of the first LAYOUT_HINTS field `row` carries, or None."""
    if not isinstance(row, Mapping):
        return None
    return next(((f, *LAYOUT_HINTS[f]) for f in LAYOUT_HINTS if f in row), None)


def field_at(row: Any, path: str) -> Any:
    """The value of a raw field named by key or by a dotted path into nested objects (`data.question`,
    `reward_model.ground_truth`); a key that holds the dots itself (a flattened column) wins. None when
    absent or null, or when the path meets a value that is not an object."""
    if isinstance(row, Mapping) and path in row:
        return row[path]
    value: Any = row
    for key in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def apply_field_map(row: Mapping[str, Any], field_map: Mapping[str, str]) -> dict[str, Any]:
    """A source's renames ({raw field: canonical field}, `--map`). The map wins: a canonical field it names
    takes the raw field's value whenever the row has one (by key or dotted path, `field_at`; null is none),
    and the row's own field of that name is then not used, whatever the order of the row's keys. A row
    without the raw field keeps its own field of that name (a map that unifies rows of two shapes), unless
    that field is itself renamed. Several raw fields onto one canonical field: the first the row has, in
    the map's order. A top-level raw field is renamed (not kept under its own name); a nested one is
    copied, its object left as it is."""
    out = {k: v for k, v in row.items() if k not in field_map}
    given: set[str] = set()
    for path, canon in field_map.items():
        if canon not in given and (value := field_at(row, path)) is not None:
            out[canon] = value
            given.add(canon)
    return out


def apply_layout(row: Any, layout: str, field_map: Mapping[str, str] | None = None) -> Any:
    """Rename fields by `field_map` (apply_field_map), then map through the layout. Non-object rows pass
    through unchanged (the schema check reports them). A layout's error is Malformed naming the layout and
    the field; an error no rule foresaw (a value of a shape no dataset card shows) is Malformed naming its type."""
    if not isinstance(row, Mapping):
        return row
    if field_map:
        row = apply_field_map(row, field_map)
    try:
        return LAYOUTS[layout](row)
    except Malformed:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError, RecursionError) as e:
        detail = " ".join(str(e).split())[:120]
        raise Malformed(f"layout {layout}: unusable row ({type(e).__name__}: {detail})") from None


# --- reading a raw row: every error names the layout and the field -----------------------------------

class RawFields:
    """One raw row as a named layout reads it. Fields are named by key, or a dotted path into nested
    objects; each reader raises Malformed `layout NAME: ...` naming the field."""

    def __init__(self, layout: str, row: Mapping[str, Any]):
        self.layout, self.row = layout, row

    def fail(self, why: str, invalid_tests: bool = False) -> Malformed:
        return (InvalidTestsRow if invalid_tests else Malformed)(f"layout {self.layout}: {why}")

    def get(self, path: str) -> Any:
        return field_at(self.row, path)

    def required(self, path: str) -> Any:
        value = self.get(path)
        if value is None:
            raise MissingField(f"layout {self.layout}: missing field {path!r}", path)
        return value

    def text(self, path: str, required: bool = False) -> str | None:
        """A string field; required: present and not blank. Absent or null: None."""
        value = self.required(path) if required else self.get(path)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(f"field {path!r} must be a string, got {type(value).__name__}")
        if required and not value.strip():
            raise self.fail(f"empty field {path!r}")
        return value

    def json(self, path: str, required: bool = False) -> Any:
        """A field holding JSON text (decoded), or the value itself when a reader already decoded it.
        Absent, null or blank text: None (required: Malformed)."""
        value = self.required(path) if required else self.get(path)
        if isinstance(value, str):
            if not value.strip():
                if required:
                    raise self.fail(f"empty field {path!r}")
                return None
            try:
                return json.loads(value)
            except json.JSONDecodeError as e:
                raise self.fail(f"field {path!r} is not valid JSON ({e.msg} at char {e.pos})") from None
            except (ValueError, RecursionError) as e:
                raise self.fail(f"field {path!r} is not valid JSON ({type(e).__name__})") from None
        return value

    def date(self, path: str) -> str | None:
        try:
            return iso_date(self.get(path), f"field {path!r}")
        except Malformed as e:
            raise self.fail(str(e)) from None

    def chat(self, path: str, required: bool = False) -> tuple[str | None, str | None]:
        """(first user turn, the assistant turn after it) of a chat-message list."""
        value = self.required(path) if required else self.get(path)
        if value is None:
            return None, None
        try:
            return first_exchange(value)
        except ValueError as e:
            raise self.fail(f"field {path!r}: {e}") from None


def first_exchange(messages: Any) -> tuple[str | None, str | None]:
    """(problem, response) of a chat list: the first user turn (role/from `user` or `human`) and the
    first assistant turn (`assistant` or `gpt`) after it; system turns and later turns are not used.
    ValueError for a list whose turns are not {role, content} / {from, value} objects of text."""
    if not isinstance(messages, (list, tuple)):
        raise ValueError(f"must be a list of chat turns, got {type(messages).__name__}")
    problem = response = None
    for i, turn in enumerate(messages):
        if not isinstance(turn, Mapping):
            raise ValueError(f"turn {i} is not an object")
        role = turn.get("role") if turn.get("role") is not None else turn.get("from")
        content = turn.get("content") if turn.get("content") is not None else turn.get("value")
        if not isinstance(role, str) or not isinstance(content, str):
            raise ValueError(f"turn {i} needs a role and text content")
        if problem is None and role in _USER_ROLES:
            problem = content
        elif problem is not None and role in _ASSISTANT_ROLES:
            response = content
            break
    if problem is None:
        raise ValueError("no user turn")
    return problem, response


# --- small mapping helpers ---------------------------------------------------------------------------

def python_block(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def with_starter_code(problem: str | None, starter_code: Any) -> str | None:
    """The problem with its starter code (a signature to complete) appended as a ```python block."""
    if problem is None or not isinstance(starter_code, str) or not starter_code.strip():
        return problem
    return f"{problem.rstrip()}\n\nStarter code:\n{python_block(starter_code)}"


def boxed_answer(text: Any) -> str | None:
    """A reference answer read from a solution: its last \\boxed{} (grading's reader), stripped; None
    when there is none or it is blank."""
    boxed = last_boxed(text)
    return (boxed.strip() or None) if boxed is not None else None


def think_markers_to_tags(text: str | None) -> str | None:
    """OpenThoughts' <|begin_of_thought|>…<|end_of_thought|> <|begin_of_solution|>…<|end_of_solution|>
    as `<think>\\n…\\n</think>\\n\\n…`, the form the graders read (the answer is what follows </think>)."""
    if text is None or "<|begin_of_thought|>" not in text:
        return text
    _, _, rest = text.partition("<|begin_of_thought|>")
    thought, _, rest = rest.partition("<|end_of_thought|>")
    _, found, solution = rest.partition("<|begin_of_solution|>")
    solution = (solution if found else rest).split("<|end_of_solution|>")[0]
    return f"<think>\n{thought.strip()}\n</think>\n\n{solution.strip()}"


def answer_value(value: Any) -> Any:
    """An answer as given, blank text as none (no checkable answer)."""
    return None if isinstance(value, str) and not value.strip() else value


def meta(**fields: Any) -> dict[str, Any] | None:
    """The metadata worth keeping: fields that hold something (no None, blank text, empty list or
    non-finite number)."""
    kept = {}
    for k, v in fields.items():
        if v is None or (isinstance(v, (str, list, dict)) and not (v.strip() if isinstance(v, str) else v)):
            continue
        if isinstance(v, float) and not math.isfinite(v):
            continue
        kept[k] = v
    return kept or None


def literal_list(value: Any) -> Any:
    """TACO's tag fields are Python list reprs ("['Sorting', 'Greedy']"): the list, else the value."""
    if isinstance(value, str) and value.startswith("["):
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            return value
        if isinstance(parsed, list) and all(isinstance(x, str) for x in parsed):
            return parsed
    return value


def program_list(value: Any) -> list[str] | None:
    """APPS/TACO `solutions`: JSON text of a list of programs → the programs, each a ```python block;
    anything else (absent, empty, not JSON, not a list of strings) → None: the row keeps its tests and
    has no reference (verification later drops a code problem without one, naming why)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except (ValueError, RecursionError):  # not JSON, a number too long, nesting too deep
            return None
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        return None
    return [python_block(p) for p in value if p.strip()] or None


# --- the layouts -------------------------------------------------------------------------------------

@register_layout("canonical")
def canonical(row: Mapping[str, Any]) -> dict[str, Any]:
    """The record schema's field names (schema.py) as they are; a field that is absent takes its alias: problem ←
    question | prompt, response ← solution (a string), answer ← final_answer | ground_truth, tests ←
    input_output. A row with no problem and a chat list in `messages` or `conversations` takes its first
    user turn as problem and the assistant turn after it as response. Never raises: what is missing is
    the schema's to report (benchmarks are read with this layout too)."""
    out = dict(row)
    for field, aliases in _ALIASES.items():
        if out.get(field) is None:
            for alias in aliases:
                v = row.get(alias)
                if v is not None and (field != "response" or isinstance(v, str)):
                    out[field] = v
                    break
    if out.get("problem") is None:
        for chat in ("messages", "conversations"):
            try:
                problem, response = first_exchange(row.get(chat))
            except ValueError:
                continue
            out["problem"] = problem
            if out.get("response") is None:
                out["response"] = response
            break
    return out


@register_layout("apps")
def apps(row: Mapping[str, Any]) -> dict[str, Any]:
    """APPS (codeparrot/apps): question (+ starter_code) → problem; solutions (JSON text: a list of
    programs) → solutions, each a ```python block, the first → response (not a usable list: none);
    input_output (JSON text) → tests (absent or empty: none); difficulty, url, problem_id → meta; code."""
    return _apps_like(RawFields("apps", row), tests_required=False)


@register_layout("taco")
def taco(row: Mapping[str, Any]) -> dict[str, Any]:
    """TACO (BAAI/TACO): as `apps`, with input_output required (absent, null or blank: malformed); date
    (YYYY-MM-DD) → date; difficulty, url, source → origin, name, tags, skill_types, raw_tags (Python list
    reprs → lists), time_limit, memory_limit, Expected Time Complexity, Expected Auxiliary Space → meta;
    code."""
    f = RawFields("taco", row)
    out = _apps_like(f, tests_required=True)
    out["date"] = f.date("date")
    out["meta"] = meta(
        **(out["meta"] or {}), origin=f.get("source"), name=f.get("name"), tags=literal_list(f.get("tags")),
        skill_types=literal_list(f.get("skill_types")), raw_tags=literal_list(f.get("raw_tags")),
        time_limit=f.get("time_limit"), memory_limit=f.get("memory_limit"),
        expected_time_complexity=f.get("Expected Time Complexity"),
        expected_auxiliary_space=f.get("Expected Auxiliary Space"))
    return out


def _apps_like(f: RawFields, tests_required: bool) -> dict[str, Any]:
    """input_output required (taco): absent, null or blank text is malformed, naming the field; optional
    (apps): blank text is no tests."""
    tests = f.required("input_output") if tests_required else f.get("input_output")
    if isinstance(tests, str) and not tests.strip():
        if tests_required:
            raise f.fail("empty field 'input_output'")
        tests = None
    solutions = program_list(f.get("solutions"))
    return {"problem": with_starter_code(f.text("question", required=True), f.get("starter_code")),
            "solutions": solutions, "response": solutions[0] if solutions else None, "tests": tests,
            "domain": "code",
            "meta": meta(difficulty=f.get("difficulty"), url=f.get("url"), problem_id=f.get("problem_id"))}


_NUMINA_NO_ANSWER = ("proof", "notfound")


@register_layout("numina")
def numina(row: Mapping[str, Any]) -> dict[str, Any]:
    """NuminaMath-1.5 and NuminaMath-CoT (AI-MO): problem; solution → response; answer, except 1.5's
    placeholders "proof" / "notfound" (no checkable answer) → none; a row without an answer field
    (CoT) → the last \\boxed{} of its solution; problem_type, question_type, source → origin,
    problem_is_valid, solution_is_valid, synthetic → meta; domain math."""
    f = RawFields("numina", row)
    solution = f.text("solution")
    if "answer" in row:
        answer = answer_value(f.get("answer"))
        if isinstance(answer, str) and answer.strip().lower() in _NUMINA_NO_ANSWER:
            answer = None
    else:
        answer = boxed_answer(solution)
    return {"problem": f.text("problem", required=True), "response": solution, "answer": answer,
            "domain": "math",
            "meta": meta(problem_type=f.get("problem_type"), question_type=f.get("question_type"),
                         origin=f.get("source"), problem_is_valid=f.get("problem_is_valid"),
                         solution_is_valid=f.get("solution_is_valid"), synthetic=f.get("synthetic"))}


@register_layout("openr1-math")
def openr1_math(row: Mapping[str, Any]) -> dict[str, Any]:
    """OpenR1-Math-220k (open-r1): problem; answer; generations (R1 traces) → solutions, only those
    correctness_math_verify marks correct (all when it is absent) and is_reasoning_complete does not mark
    incomplete, the first → response (none correct: no response); without generations, the assistant
    turn of messages → response; problem_type, question_type, source → origin, uuid, correctness_count
    → meta; domain math. A flag list whose length differs from generations' is malformed."""
    f = RawFields("openr1-math", row)
    generations = f.get("generations")
    if generations is None:
        _, response = f.chat("messages")
        solutions = [response] if response else None
    else:
        solutions = _verified_generations(f, generations)
    return {"problem": f.text("problem", required=True), "answer": answer_value(f.get("answer")),
            "solutions": solutions, "response": solutions[0] if solutions else None, "domain": "math",
            "meta": meta(problem_type=f.get("problem_type"), question_type=f.get("question_type"),
                         origin=f.get("source"), uuid=f.get("uuid"), correctness_count=f.get("correctness_count"))}


def _verified_generations(f: RawFields, generations: Any) -> list[str] | None:
    if not isinstance(generations, list) or not all(isinstance(g, str) for g in generations):
        raise f.fail("field 'generations' must be a list of strings")
    keep = [True] * len(generations)
    for flags_field in ("correctness_math_verify", "is_reasoning_complete"):
        flags = f.get(flags_field)
        if flags is None:
            continue
        if not isinstance(flags, list) or len(flags) != len(generations):
            n = len(flags) if isinstance(flags, list) else type(flags).__name__
            raise f.fail(f"field {flags_field!r} has {n} flags for {len(generations)} generations")
        keep = [k and flag is not False for k, flag in zip(keep, flags)]
    return [g for g, k in zip(generations, keep) if k and g.strip()] or None


@register_layout("deepscaler")
def deepscaler(row: Mapping[str, Any]) -> dict[str, Any]:
    """DeepScaleR-Preview-Dataset (agentica-org): problem; answer; solution → response; domain math."""
    f = RawFields("deepscaler", row)
    return {"problem": f.text("problem", required=True), "answer": answer_value(f.required("answer")),
            "response": f.text("solution"), "domain": "math"}


@register_layout("skywork-or1")
def skywork_or1(row: Mapping[str, Any]) -> dict[str, Any]:
    """Skywork-OR1-RL-Data (Skywork), math and code splits: prompt (chat list) → problem (its user
    turn); ability → domain; reward_model.ground_truth (JSON text) → math: answer, the first of its
    accepted answers (all of them in meta.answers when several); code: tests, from inputs/outputs
    (+ fn_name) → stdin/stdout or call-based, else assert_case (assert snippets) → assert_code, else a
    HumanEval check, import_prefix + test_code + `check(entry_point)` → assert_code (keys with empty
    values are ignored); data_source, extra_info.index, extra_info.model_difficulty → meta."""
    f = RawFields("skywork-or1", row)
    problem, _ = f.chat("prompt", required=True)
    domain = f.text("ability", required=True)
    out: dict[str, Any] = {"problem": problem, "domain": domain}
    answers = None
    if domain == "code":
        out["tests"] = _skywork_code_tests(f, f.json("reward_model.ground_truth", required=True))
    else:
        answers = _skywork_answers(f)
        out["answer"] = answers[0] if answers else None
    out["meta"] = meta(data_source=f.get("data_source"), index=f.get("extra_info.index"),
                       model_difficulty=f.get("extra_info.model_difficulty"),
                       answers=answers if answers and len(answers) > 1 else None)
    return out


def _skywork_answers(f: RawFields) -> list:
    """Math ground truth: JSON text of the accepted answers (a list, or one value); text that is not
    JSON is the answer itself."""
    truth = f.required("reward_model.ground_truth")
    if isinstance(truth, str):
        try:
            truth = json.loads(truth)
        except (ValueError, RecursionError):
            pass
    answers = truth if isinstance(truth, list) else [truth]
    return [a for a in answers if a is not None and str(a).strip()]


def _skywork_code_tests(f: RawFields, truth: Any) -> dict[str, Any]:
    if not isinstance(truth, Mapping):
        raise f.fail("field 'reward_model.ground_truth' must hold a tests object for code, got "
                     f"{type(truth).__name__}")
    given = {k: v for k, v in truth.items() if v not in (None, "", [], {})}
    if "inputs" in given or "outputs" in given:
        tests = {"inputs": given.get("inputs"), "outputs": given.get("outputs")}
        if "fn_name" in given:
            tests["fn_name"] = given["fn_name"]
        return tests
    if "assert_case" in given:
        return {"assert_code": given["assert_case"]}
    if "test_code" in given and "entry_point" in given:
        prefix = given.get("import_prefix", "")
        return {"assert_code": f"{prefix}{given['test_code'].rstrip()}\ncheck({given['entry_point']})\n"}
    raise f.fail("field 'reward_model.ground_truth' has no tests (inputs/outputs, assert_case or "
                 "test_code with entry_point)")


@register_layout("openthoughts")
def openthoughts(row: Mapping[str, Any]) -> dict[str, Any]:
    """OpenThoughts-114k (default or metadata config) and OpenThoughts3 (open-thoughts): conversations
    (chat list, user|human / assistant|gpt) → problem and response; without it, problem +
    deepseek_reasoning / deepseek_solution → response `<think>reasoning</think>` + solution; the
    <|begin_of_thought|>… <|begin_of_solution|>… markers become <think>…</think> + solution; domain →
    domain (math or code; another, e.g. biology or puzzle, is malformed; none: --domain); test_cases
    (JSON text) → tests; starter_code appended to the problem; the last \\boxed{} of
    ground_truth_solution → answer (math); source → origin, difficulty → meta."""
    f = RawFields("openthoughts", row)
    if f.get("conversations") is not None or f.get("problem") is None:
        problem, response = f.chat("conversations", required=True)
    else:
        problem, response = f.text("problem", required=True), _reasoning_and_solution(f)
    domain = f.get("domain")
    if domain is not None and domain not in ("math", "code"):
        raise f.fail(f"field 'domain' is {domain!r}: only math and code problems are curated")
    tests = f.json("test_cases") if domain == "code" else None
    return {"problem": with_starter_code(problem, f.get("starter_code")),
            "response": think_markers_to_tags(response), "tests": tests or None, "domain": domain,
            "answer": boxed_answer(f.get("ground_truth_solution")) if domain != "code" else None,
            "meta": meta(origin=f.get("source"), difficulty=f.get("difficulty"))}


def _reasoning_and_solution(f: RawFields) -> str | None:
    reasoning, solution = f.text("deepseek_reasoning"), f.text("deepseek_solution")
    if not solution:
        return None
    return f"<think>\n{reasoning.strip()}\n</think>\n\n{solution.strip()}" if reasoning else solution


# CodeContests' enums (contest_problem.proto): Solution.Language, Source, Difficulty
_CC_PYTHON3 = (3, "PYTHON3")
_CC_SOURCES = {0: "UNKNOWN_SOURCE", 1: "CODECHEF", 2: "CODEFORCES", 3: "HACKEREARTH", 4: "CODEJAM",
               6: "ATCODER", 7: "AIZU"}
_CC_DIFFICULTIES = {0: "UNKNOWN_DIFFICULTY", 1: "EASY", 2: "MEDIUM", 3: "HARD", 4: "HARDER", 5: "HARDEST",
                    6: "EXTERNAL", **{n: chr(ord("A") + n - 7) for n in range(7, 18)},
                    **{n: chr(ord("L") + n - 19) for n in range(19, 30)}}


@register_layout("code-contests")
def code_contests(row: Mapping[str, Any]) -> dict[str, Any]:
    """CodeContests (deepmind/code_contests): description → problem; public_tests, private_tests and
    generated_tests (each {input: [...], output: [...]}) → one stdin/stdout tests, in that order (none
    at all: no tests); solutions ({language: [...], solution: [...]}) → the Python 3 ones (language 3,
    PYTHON3: the sandbox runs Python 3) as solutions, each a ```python block, the first → response;
    name, source → origin, difficulty (their enum names), cf_contest_id, cf_index, cf_rating, cf_tags,
    time_limit (seconds), memory_limit_bytes → meta; domain code. A problem that reads input_file or
    writes output_file cannot be judged on stdin/stdout: invalid_tests."""
    f = RawFields("code-contests", row)
    problem = f.text("description", required=True)
    for io_field in ("input_file", "output_file"):
        if f.get(io_field):
            raise f.fail(f"field {io_field!r} is {f.get(io_field)!r}: file I/O is not judged, only "
                         "stdin/stdout", invalid_tests=True)
    inputs, outputs = [], []
    for tests_field, required in (("public_tests", True), ("private_tests", True), ("generated_tests", False)):
        pairs = f.required(tests_field) if required else f.get(tests_field)
        if pairs is None:
            continue
        if not isinstance(pairs, Mapping) or not isinstance(pairs.get("input"), list) \
                or not isinstance(pairs.get("output"), list):
            raise f.fail(f"field {tests_field!r} must be an object with input and output lists")
        inputs += pairs["input"]
        outputs += pairs["output"]
    solutions = _python3_solutions(f)
    seconds = f.get("time_limit.seconds")
    return {"problem": problem, "tests": {"inputs": inputs, "outputs": outputs} if inputs or outputs else None,
            "solutions": solutions, "response": solutions[0] if solutions else None, "domain": "code",
            "meta": meta(name=f.get("name"), origin=_CC_SOURCES.get(f.get("source"), f.get("source")),
                         difficulty=_CC_DIFFICULTIES.get(f.get("difficulty"), f.get("difficulty")),
                         cf_contest_id=f.get("cf_contest_id") or None, cf_index=f.get("cf_index"),
                         cf_rating=f.get("cf_rating") or None, cf_tags=f.get("cf_tags"),
                         time_limit_seconds=(seconds + (f.get("time_limit.nanos") or 0) / 1e9) if seconds else None,
                         memory_limit_bytes=f.get("memory_limit_bytes") or None)}


def _python3_solutions(f: RawFields) -> list[str] | None:
    given = f.get("solutions")
    if given is None:
        return None
    languages, programs = (given.get("language"), given.get("solution")) if isinstance(given, Mapping) else (None, None)
    if not isinstance(languages, list) or not isinstance(programs, list) or len(languages) != len(programs):
        raise f.fail("field 'solutions' must be an object with language and solution lists of one length")
    return [python_block(p) for lang, p in zip(languages, programs)
            if lang in _CC_PYTHON3 and isinstance(p, str) and p.strip()] or None


@register_layout("livecodebench")
def livecodebench(row: Mapping[str, Any]) -> dict[str, Any]:
    """LiveCodeBench code_generation(_lite) (livecodebench): question_content (+ starter_code) →
    problem; public_test_cases (JSON text) + private_test_cases (JSON text, or base64 of zlib-compressed
    pickled JSON text; the pickle may hold only plain data) → tests, each case {input, output, testtype}:
    all `stdin` → stdin/stdout; all `functional` → call-based, fn_name from metadata.func_name (JSON
    text), each input one JSON argument per line → the argument list, each output JSON → the value;
    contest_date → date; question_title, question_id, platform, contest_id, difficulty → meta; code."""
    f = RawFields("livecodebench", row)
    public = _case_list(f, "public_test_cases", f.json("public_test_cases", required=True))
    private = _case_list(f, "private_test_cases", _decode_private_tests(f, f.get("private_test_cases")))
    return {"problem": with_starter_code(f.text("question_content", required=True), f.get("starter_code")),
            "tests": _lcb_tests(f, public + private), "domain": "code",
            "date": f.date("contest_date"),
            "meta": meta(title=f.get("question_title"), question_id=f.get("question_id"),
                         platform=f.get("platform"), contest_id=f.get("contest_id"),
                         difficulty=f.get("difficulty"))}


def _case_list(f: RawFields, field: str, cases: Any) -> list:
    if cases is None:
        return []
    if not isinstance(cases, list) or not all(isinstance(c, Mapping) for c in cases):
        raise f.fail(f"field {field!r} must be a list of test cases")
    return cases


class _PlainDataUnpickler(pickle.Unpickler):
    """Unpickles plain data only (str, bytes, numbers, lists, dicts...): a pickle that names any class
    or function (the way a pickle runs code) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it refers to {module}.{name}; only plain data is read")


def _decode_private_tests(f: RawFields, value: Any) -> Any:
    """LiveCodeBench's private tests: JSON text, or base64(zlib(pickle(JSON text)))."""
    field = "private_test_cases"
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return None
    if text[0] in "[{":
        return f.json(field)
    try:
        packed = base64.b64decode(text, validate=True)
        inflater = zlib.decompressobj()
        pickled = inflater.decompress(packed, MAX_DECODED_TESTS)
    except (binascii.Error, ValueError, zlib.error):
        raise f.fail(f"field {field!r} is neither JSON nor base64 of zlib-compressed data") from None
    if inflater.unconsumed_tail:
        raise f.fail(f"field {field!r} expands past {MAX_DECODED_TESTS:,} bytes")
    try:
        unpickled = _PlainDataUnpickler(io.BytesIO(pickled)).load()
    except pickle.UnpicklingError as e:
        raise f.fail(f"field {field!r} is not a plain-data pickle ({e})") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError, MemoryError,
            RecursionError) as e:
        raise f.fail(f"field {field!r} is not a readable pickle ({type(e).__name__})") from None
    if isinstance(unpickled, bytes):
        unpickled = unpickled.decode("utf-8", "replace")
    if isinstance(unpickled, str):
        try:
            return json.loads(unpickled)
        except (ValueError, RecursionError) as e:
            raise f.fail(f"field {field!r} decodes to text that is not JSON ({type(e).__name__})") from None
    return unpickled


def _lcb_tests(f: RawFields, cases: list) -> dict[str, Any] | None:
    if not cases:
        return None
    kinds = {c.get("testtype") for c in cases}
    if kinds == {"stdin"}:
        return {"inputs": [c.get("input") for c in cases], "outputs": [c.get("output") for c in cases]}
    if kinds != {"functional"}:
        raise f.fail(f"test cases mix or lack testtype (got {sorted(map(str, kinds))}; expected stdin or functional)")
    metadata = f.json("metadata")
    fn_name = metadata.get("func_name") if isinstance(metadata, Mapping) else None
    if not fn_name:
        raise f.fail("functional tests need field 'metadata' to name func_name")
    inputs, outputs = [], []
    for i, c in enumerate(cases):
        try:
            inputs.append([json.loads(line) for line in str(c.get("input")).split("\n") if line.strip()])
            outputs.append(json.loads(c.get("output")) if isinstance(c.get("output"), str) else c.get("output"))
        except (ValueError, RecursionError):
            raise f.fail(f"functional test {i} is not JSON (one argument per line, output a JSON value)") from None
    return {"fn_name": fn_name, "inputs": inputs, "outputs": outputs}


@register_layout("opencodereasoning")
def opencodereasoning(row: Mapping[str, Any]) -> dict[str, Any]:
    """OpenCodeReasoning (nvidia): input → problem (split_1's placeholder "-" is malformed: the question
    lives in the named dataset's row, to be filled in first); output (the R1 response) → response; id,
    source → origin, dataset, split, index, license, difficulty → meta; domain code."""
    f = RawFields("opencodereasoning", row)
    problem = f.text("input", required=True)
    if problem.strip() == "-":
        raise f.fail(f"field 'input' is the placeholder '-': the question is row {f.get('index')!r} of "
                     f"{f.get('dataset')!r} split {f.get('split')!r}; fill it in before curating")
    return {"problem": problem, "response": f.text("output"), "domain": "code",
            "meta": meta(id=f.get("id"), origin=f.get("source"), dataset=f.get("dataset"), split=f.get("split"),
                         index=f.get("index"), license=f.get("license"), difficulty=f.get("difficulty"))}

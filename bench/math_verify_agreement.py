"""bench/math_verify_agreement: math-verify's own test cases through our math reward path.

    python bench/math_verify_agreement.py [--sdist PATH] [--timeout 5]

Takes math-verify 0.9.0's source distribution (downloaded with `pip download --no-deps --no-binary :all:`
into a temporary directory, or the tarball --sdist names), reads the (gold, pred, expected) tables of its
`tests/*.py` with `ast` (nothing of theirs is imported or executed; no case is copied into this
repository; non-literal entries are counted and skipped), and runs every case twice:
  ours    MathGrader().grade_batch([(pred, {"answer": answer_of(gold)})]): the reward path, with the
          reference wrapped in \\boxed{} as for a dataset row. answer_of(gold): the text inside the gold's
          one math span (`$..$`, `$$..$$`, `\\(..\\)`, `\\[..\\]`), else its \\boxed{} contents (several
          joined with ", ", one set), else the gold text;
  theirs  math_verify.parse and verify directly, with the case's own settings (extraction targets,
          boxed priority, precision, strict, allow_set_relation_comp), as the test runs it.
It prints the number of cases, each side's agreements with the expected value, and every disagreement of
ours with one line: its category, the file and test, gold, pred, expected, ours. The category is the
one of our differences from the test's own run that alone turns its verdict into ours (else the one
whose removal alone gives the expected value; `categorize`, recomputing verdicts in this process):
  normalisation   our text rules (tasks/grading/math_answers.py)
  set_relation    allow_set_relation_comp=True: an inequality equals its interval both ways
  relations       the relation rules: a false relation, a chain whose numeric parts disagree, or a
                  fragment of a span math-verify could not parse is wrong (math_relations.py)
  numbers         the number rule: exact golds exactly, decimal golds to 6 significant digits of their
                  size, in place of math-verify's 6 decimals (math_numbers.py)
  settings        the reward path's fixed settings (both extraction targets, 6 decimals, strict) where
                  the case sets its own (precision, strict=False, one extraction target)
  reference_form  the reference read as \\boxed{answer}, as for a dataset row, not as the gold text
  reference       ours is INFRA "invalid_reference" (curation would drop the row as invalid_answer)
  other           none of these
Unexplained: a disagreement of category other, or beyond the examined count of its category (KNOWN);
the exit status is 1 when there is one (tests/grading/test_math_verify_peer.py allows none). It also
prints how many preds our extraction (tasks/grading/math_reading.py, which the relation rules judge)
reads exactly as `math_verify.parse` does: all of them, or the rules judge something math-verify did not read.
"""
from __future__ import annotations

import argparse
import ast
import logging
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tasks.grading.grade import Outcome  # noqa: E402
from tasks.grading.math_answers import normalize_answer_text  # noqa: E402

VERSION = "0.9.0"
# Our disagreements with math-verify 0.9.0's expected values, at most, per category: each one examined and
# kept on purpose (docs/training.md, "Math rewards"). A new one fails tests/grading/test_math_verify_peer.py until it
# is examined too.
KNOWN = {"normalisation": 1, "set_relation": 1, "relations": 6, "numbers": 3, "settings": 3, "reference_form": 2}


@dataclass
class Case:
    file: str
    test: str
    gold: str
    pred: str
    expected: bool
    targets: tuple[str, ...] = ("latex", "expr")  # the test's extraction targets
    boxed_priority_0: bool = True  # compare_strings builds LatexExtractionConfig(boxed_match_priority=0)
    precision: int = 6
    strict: bool = True
    set_relation: bool = False
    ours: str = ""  # "correct", "wrong", or "infra:<verdict>"
    theirs: bool | None = None
    category: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def ours_ok(self) -> bool:
        return self.ours == ("correct" if self.expected else "wrong")


def download_sdist(dest: Path) -> Path:
    """math-verify's sdist via pip (PyPI); raises RuntimeError with pip's last line when it fails."""
    try:
        res = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                              f"math-verify=={VERSION}", "-d", str(dest)], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"pip download math-verify=={VERSION} took more than 300 s") from None
    found = sorted(dest.glob("math_verify-*.tar.gz"))
    if res.returncode != 0 or not found:
        tail = (res.stderr or res.stdout).strip().splitlines()
        raise RuntimeError(f"pip download math-verify=={VERSION} failed: {tail[-1] if tail else res.returncode}")
    return found[0]


def _literal(node: ast.AST):
    return ast.literal_eval(node)


def _call_settings(fn: ast.FunctionDef) -> tuple[str, dict[str, ast.AST]] | None:
    """How the test body checks a case: ("compare_strings", its keyword nodes) or ("parse_verify", {})."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "compare_strings":
                return "compare_strings", {k.arg: k.value for k in node.keywords}
            if node.func.id == "verify":
                return "parse_verify", {}
    return None


def _setting(node: ast.AST | None, row: dict, default):
    if node is None:
        return default
    if isinstance(node, ast.Name) and node.id in row:
        return row[node.id]
    return _literal(node)


def read_cases(sdist: Path) -> tuple[list[Case], int]:
    """The (gold, pred, expected) cases of the sdist's tests, and how many table rows were skipped (not
    literals, e.g. f-strings)."""
    cases, skipped = [], 0
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if re.search(r"/tests/test_[^/]+\.py$", m.name)]
        for m in sorted(members, key=lambda m: m.name):
            tree = ast.parse(tar.extractfile(m).read().decode("utf-8"), m.name)
            for fn in [n for n in tree.body if isinstance(n, ast.FunctionDef)]:
                how = _call_settings(fn)
                for deco in fn.decorator_list:
                    if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize"):
                        continue
                    names = [s.strip() for s in _literal(deco.args[0]).split(",")]
                    outcome = next((n for n in ("expected", "result") if n in names), None)
                    if how is None or "gold" not in names or "pred" not in names or outcome is None:
                        continue
                    for elt in deco.args[1].elts:
                        try:
                            row = dict(zip(names, _literal(elt)))
                        except ValueError:
                            skipped += 1
                            continue
                        kind, kw = how
                        c = Case(Path(m.name).name, fn.name, row["gold"], row["pred"], bool(row[outcome]))
                        if kind == "compare_strings":
                            c.targets = tuple(_setting(kw.get("match_types"), row, ["latex", "expr"]))
                            c.precision = _setting(kw.get("precision"), row, 6)
                            c.strict = _setting(kw.get("strict"), row, True)
                            c.set_relation = _setting(kw.get("allow_set_relation_comp"), row, False)
                        else:
                            c.boxed_priority_0 = False
                        cases.append(c)
    return cases, skipped


_SPAN = re.compile(r"^\s*(?:\$\$(.+)\$\$|\$(.+)\$|\\\((.+)\\\)|\\\[(.+)\\\])\s*$", re.S)
_DELIMS = re.compile(r"(?<!\\)\$|\\[()\[\]]")


def _boxed_contents(text: str) -> list[str]:
    out, i = [], text.find("\\boxed{")
    while i >= 0:
        depth, start = 1, i + len("\\boxed{")
        for j in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                out.append(text[start:j])
                break
        i = text.find("\\boxed{", i + 1)
    return out


def answer_of(gold: str) -> str:
    """The gold's bare answer, as a dataset row would hold it: the inside of its one math span; else its
    \\boxed{} contents (several joined with ", ", which math-verify reads as one set); else the text."""
    m = _SPAN.match(gold)
    inner = next((g for g in m.groups() if g is not None), None) if m else None
    if inner is not None and not _DELIMS.search(inner) and "\\boxed{" not in inner:
        return inner.strip()
    boxed = _boxed_contents(gold)
    if boxed:
        return ", ".join(b.strip() for b in boxed)
    return gold.strip()


def _mv(gold, pred, targets=("latex", "expr"), boxed_priority_0=False, precision=6, strict=True,
        set_relation=False, numbers=False) -> bool:
    """math-verify directly: parse both with the given extraction targets, then verify (with our number
    rule when `numbers`)."""
    from contextlib import nullcontext

    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    from tasks.grading.math_numbers import number_rule

    configs = []
    for t in targets:
        if t == "latex":
            configs.append(LatexExtractionConfig(boxed_match_priority=0) if boxed_priority_0 else LatexExtractionConfig())
        else:
            configs.append(ExprExtractionConfig())
    gold_parsed, pred_parsed = parse(gold, configs), parse(pred, configs)
    with number_rule() if numbers else nullcontext():
        return bool(verify(gold_parsed, pred_parsed, float_rounding=precision, strict=strict,
                           allow_set_relation_comp=set_relation))


def theirs(c: Case) -> bool:
    return _mv(c.gold, c.pred, c.targets, c.boxed_priority_0, c.precision, c.strict, c.set_relation)


def outcome(c: Case, normalise=True, set_relation=True, relations=True, numbers=True, case_settings=False,
            as_written=False) -> bool:
    """The reward path's verdict recomputed in this process with math-verify, each of our differences
    from plain math-verify switchable: the text rules, set/relation comparison, the relation rules, the
    number rule, the reward path's fixed settings (else the case's), the reference as \\boxed{answer}
    (else as written)."""
    from tasks.grading.math_reading import read
    from tasks.grading.math_relations import relation_fault

    norm = normalize_answer_text if normalise else (lambda t: t)
    gold = norm(c.gold) if as_written else "\\boxed{" + norm(answer_of(c.gold)) + "}"
    pred = norm(c.pred)
    settings = (dict(targets=c.targets, boxed_priority_0=c.boxed_priority_0, precision=c.precision, strict=c.strict)
                if case_settings else {})
    ok = _mv(gold, pred, set_relation=set_relation, numbers=numbers, **settings)
    return ok and not (relations and relation_fault(read(pred)))


def reads_as_math_verify(c: Case) -> bool:
    """Our extraction (math_reading.read) of the normalised pred is exactly math_verify.parse's."""
    from math_verify import parse

    from tasks.grading.math_reading import read

    pred = normalize_answer_text(c.pred)
    try:
        ours = read(pred).parsed
    except Exception:
        ours = []
    return ours == parse(pred, parsing_timeout=None)


DIFFERENCES = (  # category, our difference from the test's own run, as outcome() keywords (ours, theirs)
    ("normalisation", "normalise", True, False),
    ("set_relation", "set_relation", True, None),  # None: the case's own setting
    ("relations", "relations", True, False),
    ("numbers", "numbers", True, False),
    ("settings", "case_settings", False, True),
    ("reference_form", "as_written", False, True),
)


def categorize(c: Case) -> str:
    """Why ours differs from the expected value: the one of our differences from the test's own run
    that, switched on alone, gives our verdict; else the one that, switched off alone, gives the
    expected value (see the module docstring)."""
    if c.ours.startswith("infra"):
        return "reference" if c.ours == "infra:invalid_reference" else "other"
    ours = c.ours == "correct"
    if outcome(c) != ours:
        return "other"  # the recomputation does not even reproduce ours
    theirs_kw = {key: (c.set_relation if off is None else off) for _, key, _, off in DIFFERENCES}
    for name, key, on, _ in DIFFERENCES:
        if outcome(c, **{**theirs_kw, key: on}) == ours:
            return name
    for name, key, _, off in DIFFERENCES:
        if outcome(c, **{key: c.set_relation if off is None else off}) == c.expected:
            return name
    return "other"


def run(sdist: Path | None = None, timeout: float = 5.0) -> dict:
    """Every case through ours and theirs; returns the figures and the cases (see main for the print)."""
    from tasks.grading.math_grader import MathGrader

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        sdist = sdist or download_sdist(Path(tmp))
        cases, skipped = read_cases(sdist)
    grader = MathGrader(timeout=timeout)
    try:
        grades = grader.grade_batch([(c.pred, {"answer": answer_of(c.gold)}) for c in cases])
    finally:
        grader.close()
    for c, g in zip(cases, grades):
        c.ours = f"infra:{g.verdict}" if g.outcome is Outcome.INFRA else g.outcome.value
        try:
            c.theirs = theirs(c)
        except Exception as e:  # their own path failing is a figure, not a crash of the bench
            c.theirs, c.extra["theirs_error"] = None, type(e).__name__
        if not c.ours_ok:
            c.category = categorize(c)
    wrong = [c for c in cases if not c.ours_ok]
    return {"cases": cases, "total": len(cases), "skipped": skipped,
            "same_reading": sum(reads_as_math_verify(c) for c in cases),
            "ours_agree": sum(c.ours_ok for c in cases),
            "theirs_agree": sum(c.theirs == c.expected for c in cases),
            "disagreements": Counter(c.category for c in wrong),
            "unexplained": [c for c in wrong if c.category not in KNOWN
                            or sum(w.category == c.category for w in wrong) > KNOWN[c.category]]}


def _short(text: str, n: int = 70) -> str:
    text = repr(text)
    return text if len(text) <= n else text[:n - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdist", type=Path, help="math-verify sdist tarball (default: download it with pip)")
    ap.add_argument("--timeout", type=float, default=5.0, help="grader CPU seconds per answer")
    a = ap.parse_args(argv)
    if a.sdist is not None and not a.sdist.is_file():
        print(f"--sdist {a.sdist}: no such file", file=sys.stderr)
        return 2
    r = run(a.sdist, a.timeout)
    print(f"math-verify {VERSION} test cases: {r['total']} (skipped, not literal: {r['skipped']})")
    print(f"agree with expected: ours {r['ours_agree']}/{r['total']}, math-verify directly {r['theirs_agree']}/{r['total']}")
    print("our disagreements by category: " + (", ".join(f"{k} {v}" for k, v in sorted(r["disagreements"].items()))
                                                or "none"))
    print(f"our extraction reads the pred as math_verify.parse does: {r['same_reading']}/{r['total']}")
    print(f"unexplained: {len(r['unexplained'])}")
    for c in r["cases"]:
        if not c.ours_ok:
            print(f"  {c.category:<14} {c.file}::{c.test} gold={_short(c.gold)} pred={_short(c.pred)} "
                  f"expected={int(c.expected)} ours={c.ours}")
    return 1 if r["unexplained"] else 0


if __name__ == "__main__":
    sys.exit(main())

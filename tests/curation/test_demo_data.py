"""The bundled demo data: deterministic, well-formed, hazards exactly where the manifest says, math answers
right (math-verify) where meant right, code references passing their tests (run with /usr/bin/python3)."""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.curation import demo_data as dd

SCALE = 0.25   # ~750 math rows, ~40 code rows: every hazard, fast
NON_DROPPED = {"plain", "flawed", "too_few_tests", "invalid_tests"}


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _read(files: dd.DemoFiles) -> dict[str, list]:
    """{source: [row or raw line]} with canonical field names; math_qa mapped by its layout."""
    out = {}
    for name in ("math_chain", "code"):
        rows = []
        for line in getattr(files, name).read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                rows.append(line)
        out[name] = rows
    out["math_qa"] = [{dd.MATH_QA_LAYOUT[k]: v for k, v in r.items()}
                      for r in pq.read_table(files.math_qa).to_pylist()]
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    files = dd.write_demo_sources(tmp_path_factory.mktemp("demo"), seed=0, scale=SCALE)
    manifest = json.loads(files.manifest.read_text())
    kinds = {(r["source"], r["row"]): r for r in manifest["rows"]}
    rows = _read(files)
    by_kind: dict[str, list] = {}
    for src, items in rows.items():
        for i, row in enumerate(items, start=1):
            entry = kinds.get((src, i), {"kind": "plain"})
            by_kind.setdefault(entry["kind"], []).append((src, i, row, entry))
    bench_m = [json.loads(l) for l in files.bench_math.read_text().splitlines()]
    bench_c = [json.loads(l) for l in files.bench_code.read_text().splitlines()]
    return files, manifest, rows, by_kind, bench_m, bench_c


def test_same_seed_same_bytes_other_seed_other_data(tmp_path, demo):
    files = demo[0]
    again = dd.write_demo_sources(tmp_path / "again", seed=0, scale=SCALE)
    other = dd.write_demo_sources(tmp_path / "other", seed=1, scale=SCALE)
    for name in ("math_chain", "math_qa", "code", "bench_math", "bench_code", "manifest"):
        assert getattr(files, name).read_bytes() == getattr(again, name).read_bytes(), name
    for name in ("math_chain", "math_qa", "code", "bench_math", "bench_code"):
        assert getattr(files, name).read_bytes() != getattr(other, name).read_bytes(), name


def test_rewriting_the_same_demo_leaves_files_untouched(tmp_path):
    """A pipeline rerun rewrites the demo sources: same bytes, so nothing on disk changes."""
    first = dd.write_demo_sources(tmp_path, seed=0, scale=SCALE)
    names = ("math_chain", "math_qa", "code", "bench_math", "bench_code", "manifest")
    stamps = {n: getattr(first, n).stat().st_mtime_ns for n in names}
    getattr(first, "code").write_text("changed\n")
    again = dd.write_demo_sources(tmp_path, seed=0, scale=SCALE)
    assert {n: getattr(again, n).stat().st_mtime_ns for n in names if n != "code"} == \
        {n: t for n, t in stamps.items() if n != "code"}
    assert again.code.read_text() != "changed\n"  # a file that differs is rewritten


def test_sizes_at_scale_one(tmp_path):
    counts = json.loads(dd.write_demo_sources(tmp_path, scale=1.0).manifest.read_text())["row_counts"]
    assert 2000 <= counts["math_chain"] + counts["math_qa"] <= 4000
    assert 100 <= counts["code"] <= 200
    assert 50 <= counts["bench_math"] <= 100 and 10 <= counts["bench_code"] <= 20


@pytest.mark.parametrize("seed", range(4))
def test_the_smallest_scale_holds_every_planted_case(seed):
    files, _, _ = dd.build_demo(seed, dd.MIN_SCALE)
    kinds = Counter(line.kind for lines in files.values() for line in lines)
    assert {k: kinds[k] for k in ("malformed", "duplicate", "near_duplicate", "contaminated")} == {
        "malformed": 7, "duplicate": 5, "near_duplicate": 4, "contaminated": 4}


def test_cli_refuses_a_scale_below_the_smallest(tmp_path):
    with pytest.raises(SystemExit):
        dd.main([str(tmp_path), "--scale", str(dd.MIN_SCALE / 2)])
    assert not list(tmp_path.iterdir())


def test_cli_writes_and_lists_files(tmp_path, capsys):
    assert dd.main([str(tmp_path), "--seed", "3", "--scale", "0.05"]) == 0
    out = capsys.readouterr().out
    for name in ("math_chain.jsonl", "math_qa.parquet", "code.jsonl", "bench_math.jsonl", "bench_code.jsonl"):
        assert (tmp_path / name).exists() and name in out


def test_declared_hazard_counts(demo):
    _, manifest, _, by_kind, _, _ = demo
    assert manifest["expected_dropped"] == {"malformed": 7, "duplicate": 5, "near_duplicate": 4, "contaminated": 4}
    assert manifest["expected_verify_dropped"] == {"too_few_tests": 6, "invalid_tests": 2}
    for kind, n in {**manifest["expected_dropped"], **manifest["expected_verify_dropped"]}.items():
        assert len(by_kind[kind]) == n, kind
    assert manifest["flawed_math"] == len(by_kind["flawed"]) > 0


MATH_RESPONSE = re.compile(r"<think>\n(?:.+\n)+</think>\nThe answer is \\boxed\{(\d+)\}\.", re.S)


def test_math_rows_are_well_formed(demo):
    _, _, rows, by_kind, bench_m, _ = demo
    for src, i, row, _ in by_kind["plain"] + by_kind["flawed"]:
        if src == "code":
            continue
        where = f"{src}:{i}"
        assert set(row) == ({"problem", "domain", "response", "answer"} if src == "math_chain"
                            else {"problem", "response", "answer"}), where
        assert row.get("domain", "math") == "math", where
        assert row["problem"].endswith(" " + dd.INSTRUCTION) and row["problem"].count("boxed") == 1, where
        assert MATH_RESPONSE.fullmatch(row["response"]) and row["answer"].isdigit(), where
    for b in bench_m:
        assert set(b) == {"problem", "domain", "answer"} and b["domain"] == "math" and b["answer"].isdigit()
        assert b["problem"].endswith(" " + dd.INSTRUCTION)


def _steps(response: str) -> list[tuple[int, str, int, int]]:
    return [(int(a), op, int(b), int(c)) for a, op, b, c in re.findall(r"(\d+) ([+-]) (\d+) = (\d+)\.", response)]


def test_math_chains_are_correct_and_flawed_rows_stop_one_step_early(demo):
    _, manifest, _, by_kind, _, _ = demo
    spec = manifest["math_spec"]
    for kind in ("plain", "flawed"):
        for src, i, row, _ in by_kind[kind]:
            if src == "code":
                continue
            steps = _steps(row["response"])
            nums = [int(x) for x in re.findall(r"\d+", dd.body(row["problem"]))]
            assert all((a + b if op == "+" else a - b) == c for a, op, b, c in steps), (src, i)
            assert all(0 <= c <= spec["max_total"] and 2 <= b <= spec["max_operand"] for _, _, b, c in steps)
            boxed = re.search(r"\\boxed\{(\d+)\}\.$", row["response"]).group(1)
            ops = len(nums) - 1
            if kind == "plain":
                assert len(steps) == ops and boxed == row["answer"], (src, i)
            else:
                assert ops >= spec["hard_ops"] and len(steps) == ops - 1 and boxed != row["answer"], (src, i)


def test_math_answers_per_math_verify(demo):
    from math_verify import parse, verify

    _, _, _, by_kind, _, _ = demo
    rng = random.Random(0)
    math_rows = lambda kind: [r for s, _, r, _ in by_kind[kind] if s != "code"]
    for kind, sample, expect in (("plain", 120, True), ("flawed", 40, False), ("contaminated", 3, True)):
        for row in rng.sample(math_rows(kind), min(sample, len(math_rows(kind)))):
            after = row["response"].split("</think>")[-1]
            assert verify(parse(f"${row['answer']}$"), parse(after)) is expect, row["response"]


def test_benchmark_is_disjoint_from_training(demo):
    _, _, rows, by_kind, bench_m, bench_c = demo
    bench = [dd.body(b["problem"]) for b in bench_m + bench_c]
    bench_grams = set().union(*(dd.ngrams(dd.words(b), 7) for b in bench))
    kept = [r for kind in NON_DROPPED for s, _, r, _ in by_kind.get(kind, [])]
    train_norm = {_norm(dd.body(r["problem"])) for r in kept}
    assert not train_norm & {_norm(b) for b in bench}
    for r in kept:
        assert not dd.ngrams(dd.words(dd.body(r["problem"])), 7) & bench_grams, r["problem"]
    # same arithmetic never appears under another name: compare the numbers with the verbs' signs
    sign_of = [(re.compile(re.escape(p).replace(r"\{n\}", r"(\d+)")), s) for s in "+-"
               for p in (dd.ADD if s == "+" else dd.SUB)]

    def arithmetic(problem: str) -> tuple:
        first, *rest = dd.body(problem).split(". ")
        steps = [(s, m.group(1)) for sent in rest for rx, s in sign_of for m in [rx.search(sent)] if m]
        return (re.search(r"\d+", first).group(), *steps)

    train_arith = {arithmetic(r["problem"]) for r in kept if "answer" in r}
    assert not train_arith & {arithmetic(b["problem"]) for b in bench_m}
    assert len({b["problem"] for b in bench_m}) == len(bench_m)


def test_plain_rows_are_not_near_duplicates_of_each_other(demo):
    by_kind = demo[3]
    kept = [r["problem"] for kind in NON_DROPPED for _, _, r, _ in by_kind.get(kind, [])]
    for n in (3, 5):
        shingles = [dd.ngrams(dd.words(p), n) for p in kept]
        index: dict = {}
        for i, sh in enumerate(shingles):
            for g in sh:
                index.setdefault(g, []).append(i)
        for i, sh in enumerate(shingles):
            shared: dict[int, int] = {}
            for g in sh:
                for j in index[g]:
                    if j > i:
                        shared[j] = shared.get(j, 0) + 1
            for j, c in shared.items():
                assert c / (len(sh) + len(shingles[j]) - c) < 0.65, (n, kept[i], kept[j])


def _problem_of(rows, ref):
    return rows[ref["source"]][ref["row"] - 1]["problem"]


def test_duplicates_differ_only_in_case_and_whitespace(demo):
    _, _, rows, by_kind, _, _ = demo
    order = ["math_chain", "math_qa", "code"]
    for src, i, row, entry in by_kind["duplicate"]:
        orig = _problem_of(rows, entry["of"])
        assert row["problem"] != orig and _norm(row["problem"]) == _norm(orig)
        assert (order.index(entry["of"]["source"]), entry["of"]["row"]) < (order.index(src), i)
    assert {s for s, *_ in by_kind["duplicate"]} >= {"math_qa"}


def test_near_duplicates_are_close_but_not_equal(demo):
    _, _, rows, by_kind, _, _ = demo
    for src, i, row, entry in by_kind["near_duplicate"]:
        orig = _problem_of(rows, entry["of"])
        assert _norm(row["problem"]) != _norm(orig)
        for n in range(1, 6):
            a, b = dd.ngrams(dd.words(row["problem"]), n), dd.ngrams(dd.words(orig), n)
            assert dd.jaccard(a, b) >= 0.85, (n, row["problem"])


def test_contaminated_rows_embed_a_benchmark_problem_after_another_lead_in(demo):
    _, _, _, by_kind, bench_m, bench_c = demo
    bench = [b["problem"] for b in bench_m + bench_c]
    for src, i, row, _ in by_kind["contaminated"]:
        hits = [b for b in bench if _norm(b) in _norm(row["problem"])]
        assert len(hits) == 1 and not _norm(row["problem"]).startswith(_norm(hits[0])), (src, i)
    assert {s for s, *_ in by_kind["contaminated"]} == {"math_chain", "math_qa", "code"}


def test_benchmark_problems_are_more_than_shared_template_text(demo):
    """Each benchmark problem has a 9-word run whose 5-grams are in no more than 10% (and < 2) of the
    other problems of its benchmark, so decontamination that masks template phrases still matches it."""
    _, _, _, _, bench_m, bench_c = demo
    for bench in (bench_m, bench_c):
        grams = [dd.ngrams(dd.words(dd.body(b["problem"])), 5) for b in bench]
        df: dict = {}
        for g in grams:
            for x in g:
                df[x] = df.get(x, 0) + 1
        common = {x for x, n in df.items() if n >= max(2, 0.1 * len(bench))}
        for b in bench:
            ws = dd.words(dd.body(b["problem"]))
            assert any(not dd.ngrams(ws[i:i + 9], 5) & common for i in range(len(ws) - 8)), b["problem"]


def test_malformed_rows_break_one_rule_each(demo):
    by_kind = demo[3]

    def broken(row) -> str:
        if isinstance(row, str):
            return "not JSON"
        if not isinstance(row, dict):
            return "not an object"
        if not row.get("problem"):
            return "empty problem"
        if row.get("domain", "math") not in ("math", "code"):
            return "unknown domain"
        try:
            json.loads(row["tests"])
        except (KeyError, json.JSONDecodeError):
            return "unparsable tests"
        return ""

    reasons = sorted(broken(r) for _, _, r, _ in by_kind["malformed"])
    assert reasons == ["empty problem", "empty problem", "not JSON", "not an object", "unknown domain",
                       "unparsable tests", "unparsable tests"]


# ---------------------------------------------------------------------------------------------------
# Code: every reference runs against its tests in a plain /usr/bin/python3 (test-only harness).

HARNESS = r'''
import contextlib, io, json, sys
results = []
for code, tests in json.load(sys.stdin):
    passed = total = 0
    try:
        if "assert_code" in tests:
            g = {"__name__": "solution"}
            exec(code, g)
            for line in tests["assert_code"].splitlines():
                total += 1
                try:
                    exec(line, g); passed += 1
                except Exception:
                    pass
        elif "fn_name" in tests:
            g = {"__name__": "solution"}
            exec(code, g)
            fn = getattr(g["Solution"](), tests["fn_name"]) if "Solution" in g else g[tests["fn_name"]]
            for args, want in zip(tests["inputs"], tests["outputs"]):
                total += 1
                try:
                    passed += fn(*args) == want
                except Exception:
                    pass
        else:
            for inp, want in zip(tests["inputs"], tests["outputs"]):
                total += 1
                sys.stdin, out = io.StringIO(inp), io.StringIO()
                try:
                    with contextlib.redirect_stdout(out):
                        exec(code, {"__name__": "__main__"})
                    lines = lambda s: [x.strip() for x in s.strip().splitlines()]
                    passed += lines(out.getvalue()) == lines(want)
                except Exception:
                    pass
    except Exception:
        pass
    results.append([passed, total])
print(json.dumps(results))
'''


def _run_references(jobs: list[tuple[str, dict]]) -> list[tuple[int, int]]:
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    out = subprocess.run([python, "-c", HARNESS], input=json.dumps(jobs), capture_output=True, text=True,
                         timeout=120, check=True)
    return [tuple(x) for x in json.loads(out.stdout)]


def _code_of(response: str) -> str:
    return re.findall(r"```python\n(.*?)```", response.split("</think>")[-1], re.S)[-1]


def test_code_rows_are_well_formed(demo):
    by_kind = demo[3]
    forms = set()
    for kind in NON_DROPPED:
        for src, i, row, _ in by_kind.get(kind, []):
            if src != "code":
                continue
            assert set(row) == {"problem", "domain", "response", "tests"} and row["domain"] == "code"
            assert re.fullmatch(r"<think>\n.+\n</think>\n```python\n.+\n```", row["response"], re.S), (src, i)
            t = row["tests"]
            form = "assert" if "assert_code" in t else "call" if "fn_name" in t else "stdin"
            forms.add(form)
            if form != "assert":
                assert len(t["inputs"]) == len(t["outputs"])
                assert form == "call" or all(isinstance(x, str) for x in t["inputs"] + t["outputs"])
    assert forms == {"stdin", "call", "assert"}


def test_code_references_pass_their_tests_except_the_declared_wrong_ones(demo):
    by_kind = demo[3]
    cases = [(kind, r) for kind in NON_DROPPED | {"duplicate", "near_duplicate", "contaminated"}
             for s, _, r, _ in by_kind.get(kind, []) if s == "code"]
    results = _run_references([(_code_of(r["response"]), r["tests"]) for _, r in cases])
    for (kind, row), (passed, total) in zip(cases, results):
        if kind == "invalid_tests":
            assert total >= 16 and passed < total, row["problem"]
        elif kind == "too_few_tests":
            assert 3 <= total <= 8 and passed == total, row["problem"]
        else:
            assert total >= 16 and passed == total, (kind, row["problem"], passed, total)


def test_every_code_template_including_the_benchmark_ones_is_self_consistent():
    rng = random.Random(7)
    items = [tpl(rng, 16) for tpl in dd.TRAIN_TEMPLATES + dd.BENCH_TEMPLATES for _ in range(3)]
    for it, (passed, total) in zip(items, _run_references([(it.solution, it.tests) for it in items])):
        assert passed == total == 16, (it.template, it.problem)

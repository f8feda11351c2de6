"""A user's own raw files through `klear pipeline --config FILE`, as a new user runs it: an OpenR1-layout math
file (chains of thought in `generations`) and a TACO-layout code file go through their layouts, SFT trains on
the chains of thought, code problems whose reference passes are kept, every other row is in `dropped` with its
reason, a verbatim copy of a templated benchmark problem is contaminated and its template-mates are not; the
commented template round-trips, and a misspelt key in the file is one line before any work."""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KLEAR = [sys.executable, "-m", "flows.cli"]

TEMPLATE = "Let the first quantity be equal to {a} and let the second quantity be equal to {b}, then compute the sum."
BENCH = [(12, 7), (30, 5), (8, 41), (16, 9), (23, 14), (5, 5), (61, 2), (19, 33)]


def klear(*args, env=None):
    e = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    e.pop("PREFECT_API_URL", None)
    e.update(env or {})
    return subprocess.run(KLEAR + [str(a) for a in args], capture_output=True, text=True, cwd=ROOT, env=e, timeout=900)


def _cot(a: int, b: int) -> str:
    return (f"<think>We need {a} plus {b}. Start from {a}, count up {b} more: {a} + {b} = {a + b}. "
            f"Check: {a + b} - {b} = {a}. So the answer is {a + b}.</think> The sum is \\boxed{{{a + b}}}.")


def _files(d: Path) -> dict[str, Path]:
    d.mkdir(parents=True)
    math = []
    for a in range(2, 9):
        for b in range(3, 8):
            math.append({"problem": f"Tom has {a} marbles and finds {b} more marbles on his way home. How many "
                                    f"marbles does Tom have now?",
                         "solution": f"{a + b}", "answer": str(a + b), "generations": [_cot(a, b)],
                         "correctness_math_verify": [True]})
    math.append(dict(math[0]))                                          # a duplicate
    a, b = BENCH[2]
    math.append({"problem": TEMPLATE.format(a=a, b=b), "answer": str(a + b), "generations": [_cot(a, b)]})  # a copy
    math.append({"problem": TEMPLATE.format(a=70, b=3), "answer": "73", "generations": [_cot(70, 3)]})  # a mate
    code = []
    for k in range(5):
        ins = [f"{i} {i + k}\n" for i in range(20)]
        outs = [f"{i + i + k}\n" for i in range(20)]
        ref = "a, b = map(int, input().split())\nprint(a + b)" if k else "print(0)"  # k = 0: a failing reference
        code.append({"question": f"Read two integers (the second exceeds the first by {k}) and print their sum.",
                     "solutions": json.dumps([ref]), "input_output": json.dumps({"inputs": ins, "outputs": outs})})
    files = {"openr1": d / "openr1.jsonl", "taco": d / "taco.jsonl", "bench": d / "bench.jsonl"}
    files["openr1"].write_text("".join(json.dumps(r) + "\n" for r in math))
    files["taco"].write_text("".join(json.dumps(r) + "\n" for r in code))
    files["bench"].write_text("".join(json.dumps({"problem": TEMPLATE.format(a=a, b=b), "answer": str(a + b)}) + "\n"
                                      for a, b in BENCH))
    return files


def _config_file(tmp_path: Path, files: dict[str, Path], **extra) -> Path:
    import yaml

    doc = {"demo": False,
           "sources": {"openr1": {"path": str(files["openr1"]), "layout": "openr1-math"},
                       "taco": {"path": str(files["taco"]), "layout": "taco"}},
           "benchmarks": {"bench_math": str(files["bench"])}, "eval_benchmark": "bench_math",
           "sft": {"epochs": 1, "max_steps": 4, "batch_size": 4, "micro_batch_size": 4, "seq_len": 256, "lr": 3e-3},
           "difficulty_k": 1, "eval_k": 1, "eval_max_tokens": 24,
           "rl": {"steps": 1, "prompts_per_step": 2, "rollouts_per_prompt": 2, "mini_batches": 1, "max_tokens": 24,
                  "lr": 1e-4, "domains": ["math"], "selection": {"math_min": None}},
           **extra}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_printed_template_reads_back_as_the_defaults(tmp_path):
    from pydantic import TypeAdapter

    from tasks.pipeline.config import PipelineConfig

    r = klear("pipeline", "--print-config")
    assert r.returncode == 0, r.stderr
    import yaml

    doc = yaml.safe_load(r.stdout)
    assert dataclasses.asdict(TypeAdapter(PipelineConfig).validate_python(doc)) == dataclasses.asdict(PipelineConfig())
    assert "# your own data (with demo: false)" in r.stdout and "layout: taco" in r.stdout


@pytest.mark.parametrize("extra, needle", [
    ({"sft": {"max_step": 4}}, "sft.max_step: unknown setting (did you mean max_steps?)"),
    ({"sources": {"taco": {"path": "x.jsonl", "layout": "tacoo"}}}, "sources.taco.layout must be one of"),
    ({"demo": True}, "demo is on: the run would curate the bundled demo data and ignore your sources and benchmarks"),
])
def test_a_bad_key_in_the_file_is_one_line_before_any_work(tmp_path, extra, needle):
    files = _files(tmp_path / "in")
    path = _config_file(tmp_path, files, **extra)
    r = klear("pipeline", "--config", path, "--store", tmp_path / "store")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and f"--config {path}: " in lines[0] and needle in lines[0], r.stderr
    assert not (tmp_path / "store").exists()


def test_a_field_map_no_row_matches_is_one_line_naming_the_source_s_key_before_any_work(tmp_path):
    """Read as `klear curate` reads its --map before any work, named in the file's terms."""
    files = _files(tmp_path / "in")
    path = _config_file(tmp_path, files, sources={"mine": {"path": str(files["openr1"]), "layout": "openr1-math",
                                                           "field_map": {"data.question": "problem"}}})
    r = klear("pipeline", "--config", path, "--store", tmp_path / "store")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"klear: error: --config {path}: sources.mine.field_map: mine.data.question=problem: "
                               "no row of source 'mine' has field 'data.question'"), r.stderr
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("text, needle", [
    ("demo: false\nsources: {a: x.parquet, a: y.jsonl}\n", "line 2: key 'a' given twice (first on line 2)"),
    ("sft:\n  epochs: 2\nseed: 1\nsft:\n  epochs: 3\n", "line 4: key 'sft' given twice (first on line 1)"),
    ('{"seed": 1,\n "seed": 2}', "line 2: key 'seed' given twice (first on line 1)"),
])
def test_a_key_given_twice_in_the_file_is_one_line_naming_it_and_its_line(tmp_path, text, needle):
    """YAML itself keeps the last of a repeated key: the first source or `sft:` block would be dropped silently."""
    path = tmp_path / "run.yaml"
    path.write_text(text)
    r = klear("pipeline", "--config", path, "--store", tmp_path / "store")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"klear: error: --config {path}: {needle}"), r.stderr
    assert not (tmp_path / "store").exists()


def test_a_merge_key_may_still_be_overridden_by_the_mapping_s_own_keys(tmp_path):
    from flows.config_template import read_settings

    path = tmp_path / "run.yaml"
    path.write_text("base: &b {epochs: 2, seq_len: 16}\nsft:\n  <<: *b\n  epochs: 3\n")
    assert read_settings(str(path))["sft"] == {"epochs": 3, "seq_len": 16}


@pytest.mark.slow
@pytest.mark.docker
def test_raw_openr1_and_taco_files_run_to_the_end(tmp_path, session_api):
    import duckdb

    files = _files(tmp_path / "in")
    store = tmp_path / "store"
    r = klear("pipeline", "--config", _config_file(tmp_path, files), "--store", store, env=session_api)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "| INFO" not in r.stderr  # the stage lines once, not Prefect's console copy of each as well
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    with duckdb.connect(str(store / "catalog.duckdb"), read_only=True) as db:
        kept = db.sql("select source, domain, problem, response, row from problems").fetchall()
        dropped = db.sql("select source, reason, problem, row from dropped").fetchall()
    math = [k for k in kept if k[0] == "openr1"]
    assert math and all(k[3].startswith("<think>") for k in math)         # SFT data: the chains of thought
    assert len([k for k in kept if k[0] == "taco"]) == 4                  # working references only
    assert any(k[2] == TEMPLATE.format(a=70, b=3) for k in math)          # the template-mate is kept
    reasons = {(d[0], d[1]) for d in dropped}
    assert ("openr1", "duplicate") in reasons and ("openr1", "contaminated") in reasons
    assert any(d[0] == "taco" for d in dropped)                           # the failing reference, with its reason
    assert len(kept) + len(dropped) == 35 + 3 + 5                         # every row: kept or dropped
    lines = {(k[0], k[4]) for k in kept} | {(d[0], d[3]) for d in dropped}  # ... once, by its source line
    assert len(lines) == len(kept) + len(dropped) and not any(line[1] is None for line in lines)
    assert summary["sft"] and summary["rl"] and summary["benchmark"] == "bench_math"
    sft_state = json.loads((Path(summary["sft"]) / "sft_config.json").read_text())
    assert sft_state["dataset"] == summary["dataset"] and sft_state["examples"] == len(kept)  # CoT + references
    fates = [json.loads(line) for line in (Path(summary["rl"]) / "selection.jsonl").read_text().splitlines()]
    assert len(fates) == len(kept) and all(f["id"] for f in fates)          # RL: every problem's fate by id
    assert {f["outcome"] for f in fates if f["domain"] == "code"} == {"other_domain"}  # domains: math


def test_a_taco_file_without_its_layout_fails_a_strict_run_before_curation(tmp_path, session_api):
    """Read as canonical, TACO's references and tests are left behind (every problem invalid_tests); a
    strict run fails in one line naming the source and the layout to give, before any work."""
    files = _files(tmp_path / "in")
    path = _config_file(tmp_path, files, strict=True,
                        sources={"taco": str(files["taco"]), "openr1": {"path": str(files["openr1"]),
                                                                       "layout": "openr1-math"}})
    r = klear("pipeline", "--config", path, "--store", tmp_path / "store", env=session_api)
    errors = [line for line in r.stderr.splitlines() if line.startswith("klear: error:")]
    assert r.returncode == 2 and len(errors) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "pipeline (strict): source taco: its rows carry `solutions`" in errors[0] and "taco or apps" in errors[0]
    assert not any((tmp_path / "store" / "datasets").glob("ds-*"))  # nothing curated

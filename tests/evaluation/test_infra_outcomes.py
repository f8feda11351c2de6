"""Infra outcomes (sandbox fault, stalled grader) are left out of avg@k, pass@k and pass rates, and counted.
No model: a fake checkpoint file, a canned generator, a scripted grader."""
import json

import pytest

from storage.store import Store
from tasks.evaluation.evaluate import EvalConfig, evaluate
from tasks.generation.base import Completion
from tasks.grading import registry
from tasks.grading.grade import Grade, Outcome


class _Tok:
    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=True):
        return msgs[0]["content"]


class _Canned:
    """Sample j of a problem is answers[problem][j]."""
    def __init__(self, answers):
        self.tok, self.answers = _Tok(), answers

    def generate(self, prompts, params):
        return [[Completion(self.answers[p][j], []) for j in range(params.n)] for p in prompts]


class _Scripted:
    """"ok" is correct, "hang" a stalled grading worker (INFRA), anything else wrong."""
    def grade_batch(self, items):
        return [Grade(Outcome.INFRA, 0.0, "grader_stalled") if r == "hang" else
                Grade(Outcome.CORRECT, 1.0) if r == "ok" else Grade(Outcome.WRONG, 0.0) for r, _ in items]

    def close(self):
        pass


@pytest.fixture
def model(tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"fake weights")
    return str(d)


def _bench(tmp_path, problems):
    p = tmp_path / "b.jsonl"
    p.write_text("".join(json.dumps({"problem": q, "answer": "1"}) + "\n" for q in problems))
    return str(p)


def test_eval_leaves_an_infra_sample_out_and_reports_it(model, tmp_path):
    from tasks.evaluation.record import record_evaluation

    path = _bench(tmp_path, ["a", "b", "c"])
    gen = _Canned({"a": ["ok", "hang"], "b": ["no", "ok"], "c": ["hang", "hang"]})
    cfg = EvalConfig(k=2)
    r = evaluate(model, "b", path, cfg, generator=gen, graders={"math": _Scripted()})
    # a: 1/1 graded correct (not 1/2); b: 1/2; c: all infra, left out of both averages
    assert r.avg_at_k == pytest.approx(0.75) and r.pass_at_k == pytest.approx(1.0)
    assert (r.infra, r.infra_problems, r.n_problems) == (3, 1, 3)
    assert [(p["correct"], p["n"], p["infra"]) for p in r.per_problem] == [(1, 1, 1), (1, 2, 0), (0, 0, 2)]
    assert r.per_problem[0]["scores"] == [1.0, None]
    assert r.summary()["infra"] == 3 and r.summary()["infra_problems"] == 1
    store = str(tmp_path / "store")
    row = record_evaluation(model, r, cfg, store)
    assert row["infra"] == 3
    got = Store(store).catalog.query("SELECT infra, infra_problems, avg_at_k FROM evaluations")
    assert got == [(3, 1, 0.75)]


def test_an_answer_the_math_grader_cannot_finish_counts_as_wrong(model, tmp_path):
    """One problem solved, the other answered with a tower math-verify cannot evaluate: 0.5, not 1.0."""
    from tasks.grading.math_grader import MathGrader

    path = _bench(tmp_path, ["a", "b"])
    gen = _Canned({"a": ["<think>t</think>\\boxed{1}"], "b": ["<think>t</think>\\boxed{3^{3^{3^{3}}}}"]})
    grader = MathGrader(timeout=1)
    try:
        r = evaluate(model, "b", path, EvalConfig(k=1), generator=gen, graders={"math": grader})
    finally:
        grader.close()
    assert (r.avg_at_k, r.pass_at_k, r.infra) == (pytest.approx(0.5), pytest.approx(0.5), 0)


def test_an_old_catalog_gains_the_infra_columns(tmp_path):
    import duckdb

    path = str(tmp_path / "catalog.duckdb")
    con = duckdb.connect(path)
    con.execute("CREATE TABLE evaluations (id VARCHAR PRIMARY KEY, checkpoint VARCHAR, benchmark VARCHAR NOT NULL, "
                "benchmark_path VARCHAR, k INTEGER, seed INTEGER, avg_at_k DOUBLE, pass_at_k DOUBLE, "
                "n_problems INTEGER, created TIMESTAMP NOT NULL, results_path VARCHAR)")
    con.execute("INSERT INTO evaluations (id, benchmark, created) VALUES ('ev-old', 'b', now())")
    con.close()
    from storage.catalog import Catalog

    cat = Catalog(path)
    assert cat.insert_once("evaluations", {"id": "ev-new", "benchmark": "b", "created": "2025-01-01", "infra": 2})
    assert cat.query("SELECT id, infra FROM evaluations ORDER BY id") == [("ev-new", 2), ("ev-old", None)]


def test_difficulty_pass_rates_leave_infra_out(model, tmp_path, monkeypatch):
    from tasks.curation.config import CurateConfig
    from tasks.curation.dataset import build_curated_version, plan_curation
    from tasks.evaluation.difficulty import DifficultyConfig, build_difficulty_version

    src = tmp_path / "m.jsonl"
    answers = {"What is 1+0?": ["ok", "hang", "no", "no"],     # 1 of 3 graded
               "What is 2+0?": ["hang", "hang", "hang", "hang"],  # nothing graded
               "What is 3+0?": ["no", "no", "no", "hang"]}    # 0 of 3 graded
    src.write_text("".join(json.dumps({"problem": q, "answer": "1"}) + "\n" for q in answers))
    store = str(tmp_path / "store")
    cfg = CurateConfig(sources=[{"name": "m", "path": str(src)}], store=store)
    Store(store).publish(build_curated_version(cfg, *plan_curation(cfg)).id)
    monkeypatch.setitem(registry.GRADERS, "math", lambda **_: _Scripted())
    v = build_difficulty_version(store, model, DifficultyConfig(k=4), generator=_Canned(answers))
    rows = {r["problem"]: r for r in Store(store).read_table(v.id, "problems").to_pylist()}
    got = {q: (r["pass_rate"], r["infra_samples"], r["difficulty"]) for q, r in rows.items()}
    assert got == {"What is 1+0?": (pytest.approx(1 / 3), 1, "medium"),
                   "What is 2+0?": (None, 4, "unknown"),
                   "What is 3+0?": (0.0, 1, "unsolved")}
    assert v.parameters["infra_samples"] == 6 and v.parameters["unknown_problems"] == 1

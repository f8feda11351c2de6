"""Engines are closed by whoever builds them: `evaluate` and the difficulty stage close an engine they built
(also when sampling fails) and leave a generator they were handed open. They sample with per-problem
seeds. Fast: a fake engine stands in for the model (but in the last test, HFGenerator.close itself)."""
import json

import pytest

from storage.store import Store
from tasks.curation.config import CurateConfig
from tasks.curation.dataset import build_curated_version, plan_curation
from tasks.evaluation.difficulty import DifficultyConfig, build_difficulty_version
from tasks.evaluation.evaluate import EvalConfig, evaluate
from tasks.generation.base import Completion
from tasks.generation.sampling import problem_seeds

ROWS = [{"problem": f"What is {a}+{b}?", "answer": str(a + b)} for a, b in [(1, 1), (2, 3), (4, 4)]]


class _Tok:
    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return messages[0]["content"]


class _Engine:
    """Answers \\boxed{2} to everything; counts close() calls and keeps the seeds it was given."""

    def __init__(self, fail: bool = False):
        self.tok, self.context_length, self.fail = _Tok(), None, fail
        self.closed, self.seeds = 0, None

    def generate(self, prompts, params, seeds=None):
        if self.fail:
            raise RuntimeError("engine fault")
        self.seeds = seeds
        return [[Completion("</think>\\boxed{2}", [1]) for _ in range(params.n)] for _ in prompts]

    def close(self):
        self.closed += 1


class _Built(list):
    """The engines make_generator built, in order; `fail = True` makes the next ones fail."""
    fail = False


@pytest.fixture
def built(monkeypatch):
    made = _Built()

    def fake(model_dir, backend="auto", nproc=1, **kw):
        made.append(_Engine(fail=made.fail))
        return made[-1]

    monkeypatch.setattr("tasks.evaluation.evaluate.make_generator", fake)
    monkeypatch.setattr("tasks.evaluation.difficulty.make_generator", fake)
    return made


@pytest.fixture
def bench(tmp_path):
    p = tmp_path / "b.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return str(p)


@pytest.fixture
def store(tmp_path):
    src = tmp_path / "m.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    root = str(tmp_path / "store")
    cfg = CurateConfig(sources=[{"name": "m", "path": str(src)}], store=root)
    Store(root).publish(build_curated_version(cfg, *plan_curation(cfg)).id)
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")  # the difficulty version names the checkpoint by them
    return root, str(model)


def test_evaluate_closes_the_engine_it_built(built, bench):
    r = evaluate("unused", "b", bench, EvalConfig(k=2, seed=3))
    assert len(built) == 1 and built[0].closed == 1
    assert r.avg_at_k == 1 / 3  # 1+1 is the one problem answered right
    assert built[0].seeds == problem_seeds(3, [{"id": p["id"]} for p in r.per_problem])  # seeded per problem


def test_evaluate_leaves_a_given_generator_open(built, bench):
    gen = _Engine()
    evaluate("unused", "b", bench, EvalConfig(k=2), generator=gen)
    assert gen.closed == 0 and not built


def test_evaluate_closes_its_engine_when_sampling_fails(built, bench):
    built.fail = True
    with pytest.raises(RuntimeError, match="engine fault"):
        evaluate("unused", "b", bench, EvalConfig(k=2))
    assert built[0].closed == 1


def test_evaluate_refuses_nproc_with_a_given_generator(bench):
    with pytest.raises(ValueError, match="nproc 2 builds its own engines"):
        evaluate("unused", "b", bench, EvalConfig(k=2), generator=_Engine(), nproc=2)


def test_difficulty_closes_the_engine_it_built(built, store):
    root, model = store
    v = build_difficulty_version(root, model, DifficultyConfig(k=2, seed=4))
    assert len(built) == 1 and built[0].closed == 1
    rows = Store(root).read_table(v.id, "problems").to_pylist()
    assert built[0].seeds == problem_seeds(4, rows)
    assert sorted(r["pass_rate"] for r in rows) == [0.0, 0.0, 1.0]


def test_difficulty_leaves_a_given_generator_open(built, store):
    root, model = store
    gen = _Engine()
    build_difficulty_version(root, model, DifficultyConfig(k=2), generator=gen)
    assert gen.closed == 0 and not built


def test_difficulty_closes_its_engine_when_sampling_fails(built, store):
    root, model = store
    built.fail = True
    with pytest.raises(RuntimeError, match="engine fault"):
        build_difficulty_version(root, model, DifficultyConfig(k=2))
    assert built[0].closed == 1


@pytest.mark.slow  # builds a real (tiny) model: ≈ 6 s
def test_hf_generator_close_drops_the_model_and_is_idempotent(tmp_path):
    import gc
    import weakref

    from tasks.generation.hf_backend import HFGenerator
    from tasks.models.factory import init_model

    path = init_model(tmp_path / "m", ["<think>1+1=2</think> \\boxed{2}"] * 20)
    gen = HFGenerator.from_pretrained(str(path), device="cpu")
    ref = weakref.ref(gen.model)
    gen.close()
    gc.collect()
    assert ref() is None and gen.model is None
    gen.close()  # again: nothing to do
    with HFGenerator.from_pretrained(str(path), device="cpu") as g2:
        ref = weakref.ref(g2.model)
    gc.collect()
    assert ref() is None

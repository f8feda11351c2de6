import json

import pytest

from tasks.evaluation.evaluate import EvalConfig, evaluate, load_benchmark
from tasks.models.factory import init_model

pytestmark = pytest.mark.slow  # trains or samples a real (tiny) model

CORPUS = [f"<think>{a}+{b}={a + b}</think> \\boxed{{{a + b}}}" for a in range(20) for b in range(20)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(init_model(tmp_path_factory.mktemp("m") / "tiny", CORPUS, seed=0))


def _bench(tmp_path, rows):
    p = tmp_path / "b.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p)


def test_same_seed_same_numbers(model, tmp_path):
    path = _bench(tmp_path, [{"problem": f"{a}+1?", "answer": str(a + 1)} for a in range(4)])
    cfg = EvalConfig(k=2, max_tokens=8, seed=5, backend="hf")
    a, b = evaluate(model, "b", path, cfg), evaluate(model, "b", path, cfg)
    assert a.summary() == b.summary() and a.n_problems == 4
    assert 0.0 <= a.avg_at_k <= a.pass_at_k <= 1.0
    assert [p["sample"] for p in a.per_problem] == [p["sample"] for p in b.per_problem]


class _Canned:
    """A generator that answers from a table: tests the grading and aggregation around the model."""
    def __init__(self, tok, answers):
        self.tok, self.answers = tok, answers

    def generate(self, prompts, params):
        from tasks.generation.base import Completion
        return [[Completion(self.answers[i][j], []) for j in range(params.n)] for i in range(len(prompts))]


def test_grading_and_metrics_around_the_generator(model, tmp_path):
    from transformers import AutoTokenizer

    path = _bench(tmp_path, [{"problem": "1+1?", "answer": "2"}, {"problem": "2+2?", "answer": "4"}])
    gen = _Canned(AutoTokenizer.from_pretrained(model), [["</think>\\boxed{2}", "</think>\\boxed{3}"],
                                                           ["</think>\\boxed{5}", "</think>\\boxed{5}"]])
    r = evaluate(model, "b", path, EvalConfig(k=2), generator=gen)
    assert r.avg_at_k == 0.25 and r.pass_at_k == 0.5
    assert [p["correct"] for p in r.per_problem] == [1, 0]


def test_malformed_benchmark_row_is_named(tmp_path):
    p = tmp_path / "b.jsonl"
    p.write_text('{"problem": "ok", "answer": "1"}\n{"answer": "2"}\n')
    with pytest.raises(ValueError, match=r"b.jsonl row 2: missing 'problem'"):
        load_benchmark(str(p))

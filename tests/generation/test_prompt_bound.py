"""The prompt-length bound (tasks/generation/base.py) with a hostile 1 MB problem and a real tiny model
(1024-token context): no stage tries to allocate for it. The backend refuses it before sizing its cache,
evaluation stops naming the benchmark row, difficulty tagging and RL sampling leave it out, counted."""
import json
import logging

import pytest

from storage.store import Store
from tasks.curation.config import CurateConfig
from tasks.curation.dataset import build_curated_version, plan_curation
from tasks.evaluation.difficulty import DifficultyConfig, build_difficulty_version
from tasks.evaluation.evaluate import EvalConfig, evaluate
from tasks.generation.base import PromptTooLong, SamplingParams, chat_prompt, fit_prompts
from tasks.generation.hf_backend import HFGenerator
from tasks.models.factory import init_model
from tasks.training.rl_data import keep_fitting

HUGE = "Compute " + "1 + " * 250_000 + "1."  # 1 MB of text, far past any small model's context
SMALL = [{"problem": f"What is {a}+{b}?", "answer": str(a + b)} for a, b in [(1, 2), (3, 4)]]


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    path = init_model(tmp_path_factory.mktemp("m") / "tiny", ["What is 1+2? \\boxed{3}"] * 20, seed=0)
    return HFGenerator.from_pretrained(str(path), device="cpu"), str(path)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_the_backend_refuses_a_prompt_past_the_context_before_allocating(gen):
    """(20 kB here: the backend tokenises the whole prompt, as it must to generate from it.)"""
    g, _ = gen
    with pytest.raises(PromptTooLong, match=r"prompt 1 is [\d,]+ tokens; with max_tokens 8 .* context of 1,024"):
        g.generate([chat_prompt(g.tok, "1+1?"), chat_prompt(g.tok, HUGE[:20_000])], SamplingParams(n=4, max_tokens=8))


def test_a_prompt_fits_only_with_room_for_max_tokens(gen):
    g, _ = gen
    prompt = chat_prompt(g.tok, "What is 1+2?")
    n = len(g.tok(prompt, add_special_tokens=False)["input_ids"])
    assert fit_prompts(g.tok, 1024, [prompt], 1024 - n)[0] == [0]
    fits, too_long = fit_prompts(g.tok, 1024, [prompt], 1024 - n + 1)
    assert fits == [] and too_long[0].tokens == n


def test_evaluation_stops_naming_the_row_whose_prompt_does_not_fit(gen, tmp_path):
    g, path = gen
    bench = _jsonl(tmp_path / "b.jsonl", [SMALL[0], {"problem": HUGE, "answer": "250001"}, SMALL[1]])
    with pytest.raises(PromptTooLong, match=f"{bench} row 2: the prompt \\(more than [\\d,]+ tokens\\) does not fit"):
        evaluate(path, "b", bench, EvalConfig(k=1, max_tokens=8, backend="hf"), generator=g)


def test_difficulty_tagging_leaves_the_huge_problem_unknown_and_counts_it(gen, tmp_path, caplog):
    g, path = gen
    src = _jsonl(tmp_path / "m.jsonl", [*SMALL, {"problem": HUGE, "answer": "250001"}])
    store = str(tmp_path / "store")
    cfg = CurateConfig(sources=[{"name": "m", "path": src}], store=store)
    Store(store).publish(build_curated_version(cfg, *plan_curation(cfg)).id)
    with caplog.at_level(logging.WARNING):
        v = build_difficulty_version(store, path, DifficultyConfig(k=1, max_tokens=8), generator=g)
    rows = {r["problem"][:8]: r for r in Store(store).read_table(v.id, "problems").to_pylist()}
    assert rows[HUGE[:8]]["difficulty"] == "unknown" and rows[HUGE[:8]]["pass_rate"] is None
    assert all(r["difficulty"] != "unknown" for p, r in rows.items() if p != HUGE[:8])
    assert v.parameters["too_long_problems"] == 1
    assert "left out 1 prompt(s) longer than the model's context 1,024" in caplog.text


def test_rl_sampling_leaves_the_huge_problem_out_and_names_it(gen, caplog):
    g, _ = gen
    rows = [{"id": "small-1", **SMALL[0]}, {"id": "huge", "problem": HUGE, "answer": "1"}]
    with caplog.at_level(logging.WARNING):
        kept, left_out = keep_fitting(rows, g.tok, g.context_length, 8, "data.jsonl")
    assert [r["id"] for r in kept] == ["small-1"] and left_out == 1
    assert "problem huge" in caplog.text
    with pytest.raises(ValueError, match="no problem's prompt fits"):
        keep_fitting(rows[1:], g.tok, g.context_length, 8, "data.jsonl")

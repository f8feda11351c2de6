"""The transformers engine's decode memory (tasks/generation/decode_memory.py): the bytes of a row by hand,
the engine's budget, and batches cut to whole prompts within it without changing per-prompt samples."""
import pytest

from tasks.generation.base import SamplingParams, chat_prompt
from tasks.generation.decode_memory import (decode_bytes_per_row, engine_memory_budget, model_bytes_per_row,
                                            prompts_that_fit)
from tasks.generation.hf_backend import HFGenerator

GIB = 1 << 30


def test_bytes_of_a_row_by_hand():
    # Qwen2.5-0.5B, prompt 128 + 1,024 tokens, 8 rows a prompt, bf16 (tests/training/test_plan.py has the sum)
    kv = 2 * 24 * 2 * 64 * 1152 * 2
    decode = kv + kv // (8 * 24) + 151936 * (2 * 2 + 32) + 12 * 1024
    prefill = (kv + 128 * (4 * 896 + 3 * 4864) * 2 + 128 * 128 * (1 + 4 * 14)) // 8
    assert decode == 19_711_488 and prefill == 2_467_840
    assert decode_bytes_per_row(layers=24, heads=14, kv_heads=2, head_dim=64, hidden=896, intermediate=4864,
                                vocab=151936, prompt_width=128, max_tokens=1024, n=8, elem_bytes=2) == decode
    # a long prompt, one row, short answer: the prefill phase is the larger
    long = dict(layers=24, heads=14, kv_heads=2, head_dim=64, hidden=896, intermediate=4864, vocab=151936,
                prompt_width=8192, max_tokens=16, n=1, elem_bytes=2)
    kv = 2 * 24 * 2 * 64 * 8208 * 2
    assert decode_bytes_per_row(**long) == kv + 8192 * (4 * 896 + 3 * 4864) * 2 + 8192 ** 2 * 57


def test_budget_and_whole_prompts():
    assert engine_memory_budget(80 * GIB, 1 * GIB) == 39 * GIB
    assert engine_memory_budget(4 * GIB, 3 * GIB) == 0
    assert prompts_that_fit(10_000, 100, 8, 16) == 12
    with pytest.raises(ValueError, match=r"cannot hold one prompt's 8 rows of ≤ 16 tokens .*use the vLLM backend"):
        prompts_that_fit(799, 100, 8, 16)


@pytest.mark.slow
def test_a_budget_cuts_batches_to_whole_prompts_and_per_prompt_samples_stay(trained):
    model, tok = trained
    ps = [chat_prompt(tok, f"{a}+{a + 2}? and a longer tail {'x' * a}") for a in range(7)]
    sp = SamplingParams(n=3, temperature=1.0, top_p=1.0, max_tokens=12)
    seeds = list(range(100, 107))
    free = HFGenerator(model, tok).generate(ps, sp, seeds=seeds)
    longest = max(len(tok(p, add_special_tokens=False)["input_ids"]) for p in ps)
    per_row = model_bytes_per_row(model.config, longest, 12, 3, 4)
    g = HFGenerator(model, tok, memory_budget_bytes=2 * 3 * per_row + per_row)  # 2 prompts and a row
    batches = []
    out = g.generate(ps, sp, seeds=seeds, on_batch=lambda start, comps: batches.append((start, len(comps))))
    assert batches == [(0, 2), (2, 2), (4, 2), (6, 1)]
    assert [[c.token_ids for c in cs] for cs in out] == [[c.token_ids for c in cs] for cs in free]
    with pytest.raises(ValueError, match="cannot hold one prompt's 3 rows"):
        HFGenerator(model, tok, memory_budget_bytes=3 * per_row - 1).generate(ps, sp, seeds=seeds)


@pytest.mark.slow
def test_the_rl_engine_has_no_budget_on_cpu(trained):
    """CPU batches keep their row count (CPU samples must not move); a GPU's engine gets its share."""
    import torch

    from tasks.training.rl_engine import make_rollout_engine

    model, tok = trained
    for dtype in (torch.float32, torch.bfloat16):  # the policy itself; a bf16 copy
        engine = make_rollout_engine(model, tok, "", "hf", 64, sharded=False, dtype=dtype)
        assert engine.memory_budget_bytes is None

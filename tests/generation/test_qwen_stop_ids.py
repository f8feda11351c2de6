"""Several end-of-sequence ids with the Qwen vocabulary (<|im_end|> 151645 and <|endoftext|> 151643), through
both engines, rewards and evaluation: a completion stops at whichever comes first and ends with it, its text
(what rewards and graders read) is the same either way, and a correct answer scores whichever id ended it.

The model is a hand-set Qwen3 "bigram" over Qwen's vocabulary: every layer's output projections are zero, so
the residual stream is the last token's embedding, one-hot in its own dimension for each token of RESPONSE;
the (untied) lm_head maps each of them to the next token of RESPONSE with a logit far above all others,
and the last one to both eos ids with equal logits. Sampling therefore writes RESPONSE exactly, then ends on
either eos id, each with probability 1/2, under any temperature or top-p ≥ 0.5: with n samples per prompt
both ids occur (for the fixed seeds here), and a model that stopped at only one of them fails the test.
"""
import json

import pytest
import torch

from tasks.generation.base import SamplingParams, chat_prompt

RESPONSE = "<think>ok</think>The answer is \\boxed{3}."
IM_END, ENDOFTEXT = 151645, 151643
LOGIT = 30.0  # per unit of the normalised hidden state (√hidden): e^-(30·8) is 0 in fp32


def _bigram_model(out, tok):
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    chain = [tok(chat_prompt(tok, "x"), add_special_tokens=False)["input_ids"][-1]]
    chain += tok(RESPONSE, add_special_tokens=False)["input_ids"]
    assert len(set(chain)) == len(chain) and not {IM_END, ENDOFTEXT} & set(chain)  # a bigram needs distinct tokens
    cfg = Qwen3Config(hidden_size=64, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=2, head_dim=32, vocab_size=len(tok), max_position_embeddings=512,
                      tie_word_embeddings=False, eos_token_id=[IM_END, ENDOFTEXT], pad_token_id=ENDOFTEXT,
                      bos_token_id=None, dtype="float32")
    assert len(chain) <= cfg.hidden_size
    model = Qwen3ForCausalLM(cfg)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.zero_()
        model.lm_head.weight.zero_()
        for dim, token in enumerate(chain):
            model.model.embed_tokens.weight[token, dim] = 1.0
            nxt = chain[dim + 1:dim + 2] or [IM_END, ENDOFTEXT]
            model.lm_head.weight[nxt, dim] = LOGIT
    model.generation_config = GenerationConfig(eos_token_id=[IM_END, ENDOFTEXT], pad_token_id=ENDOFTEXT)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return str(out)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from tasks.models.qwen_tokenizer import qwen_tokenizer

    return _bigram_model(tmp_path_factory.mktemp("qwen-bigram") / "m", qwen_tokenizer())


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen-bench") / "b.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "problem": f"What is {i} + {3 - i}?", "answer": "3",
                                        "domain": "math"}) + "\n" for i in range(4)))
    return str(path)


def _check(gen, bench):
    """Completions end at either eos id, both occur, the text is RESPONSE either way; rewards and avg@k
    count every one correct."""
    from tasks.evaluation.config import EvalConfig
    from tasks.evaluation.evaluate import evaluate
    from tasks.grading.batch import grade_samples
    from tasks.grading.rewards import RewardConfig, reward_from_grade

    assert gen.eos_ids == {IM_END, ENDOFTEXT}
    prompts = [chat_prompt(gen.tok, f"What is {i} + 1?") for i in range(3)]
    comps = gen.generate(prompts, SamplingParams(n=8, temperature=1.0, top_p=1.0, max_tokens=32, seed=1))
    flat = [c for cs in comps for c in cs]
    assert {c.token_ids[-1] for c in flat} == {IM_END, ENDOFTEXT}
    for c in flat:
        assert c.finish_reason == "stop" and c.text == RESPONSE
        assert len(c.logprobs) == len(c.token_ids) and all(lp > -1.0 for lp in c.logprobs[:-1])
    rows = [{"id": "q", "domain": "math", "problem": "x", "answer": "3"}] * len(flat)
    graders = {}
    try:
        grades = grade_samples(rows, [[c.text] for c in flat], graders)
        assert {reward_from_grade("math", c.text, g[0], RewardConfig()) for c, g in zip(flat, grades)} == {1.0}
        res = evaluate("", "bigram", bench, EvalConfig(k=4, max_tokens=32), generator=gen, graders=graders,
                       progress_mode="off")
    finally:
        for g in graders.values():
            g.close()
    assert res.avg_at_k == 1.0


def test_transformers_engine_stops_at_either_eos(model_dir, bench):
    from tasks.generation.hf_backend import HFGenerator

    gen = HFGenerator.from_pretrained(model_dir, device="cpu")
    _check(gen, bench)
    assert gen.tok.padding_side == "right"  # prompts are left-padded per call; the shared tokenizer is left alone


@pytest.mark.slow
def test_vllm_engine_stops_at_either_eos(model_dir, bench):
    pytest.importorskip("vllm")
    from tasks.generation.vllm_backend import VLLMGenerator

    with VLLMGenerator(model_dir, max_model_len=512) as gen:
        _check(gen, bench)

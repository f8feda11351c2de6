"""The smallest pipeline with a Qwen-vocabulary model (`qwen3-tiny`: Qwen3 architecture, Qwen's 151K-token
BPE, ChatML, two eos ids): curate → verify → SFT → difficulty → RL with transformers rollouts, then a
second RL stage from it with vLLM rollouts on CPU (the pipeline's `rl_code` stage, here on math) →
evaluations, under a real Prefect server."""
import dataclasses
import json

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def _config(store):
    from tasks.pipeline.config import PipelineConfig
    from tasks.training.config import SelectionConfig
    from tasks.training.rl import RLConfig
    from tasks.training.sft import SFTConfig

    rl = RLConfig(steps=1, prompts_per_step=2, rollouts_per_prompt=2, mini_batches=1, micro_batch_size=4,
                  max_tokens=16, lr=1e-4, domains=("math",), backend="hf",
                  selection=SelectionConfig(math_min=None, math_max=None))
    return PipelineConfig(
        store=str(store), demo_scale=0.02, min_tests=16, model_preset="qwen3-tiny",
        sft=SFTConfig(max_steps=2, batch_size=2, micro_batch_size=2, seq_len=256, lr=3e-3),
        difficulty_k=1, rl=rl, rl_code=dataclasses.replace(rl, backend="vllm"), eval_k=1, eval_max_tokens=16)


def test_pipeline_with_the_qwen_vocabulary(prefect_server, tmp_path, capsys):
    import re
    from pathlib import Path

    from flows.pipeline import pipeline

    s = pipeline(_config(tmp_path / "store"))
    err = capsys.readouterr().err
    ends = re.findall(r"stage \d+/12 (\S+): (cached|computed|done) in ([\d.]+)s", err)
    print("\n".join(f"{name}: {how} in {secs}s" for name, how, secs in ends))  # stage timings, with -s
    assert [name for name, _, _ in ends] == [
        "demo-data", "curate", "verify", "base-model", "sft", "tag-difficulty", "rl", "rl-code", "eval-base",
        "eval-sft", "eval-rl", "eval-rl-code"], err[-3000:]
    # every stage up to the first evaluation ran; an RL step whose groups all tie (a random model's rewards)
    # leaves the weights, and so the RL evaluations, as they were (cached then)
    assert {how for name, how, _ in ends[1:9]} == {"computed"}, ends
    base = json.loads((Path(s["base"]) / "config.json").read_text())
    assert base["model_type"] == "qwen3" and base["vocab_size"] == 151936
    assert base["eos_token_id"] == [151645, 151643]
    for stage in ("base", "sft", "rl", "rl_code"):
        assert 0.0 <= s[f"{stage}_avg_at_k"] <= 1.0
    for out, backend in ((s["rl"], "hf"), (s["rl_code"], "vllm")):
        run = json.loads((Path(out) / "rl_config.json").read_text())
        assert run["config"]["backend"] == backend and run["prompts"] >= 1
        # the rollout engine pads prompts per call: checkpoints keep the tokenizer's right padding
        tok_cfg = json.loads((Path(out) / "tokenizer_config.json").read_text())
        assert tok_cfg["padding_side"] == "right" and tok_cfg["eos_token"] == "<|im_end|>"

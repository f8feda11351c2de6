"""The RL memory plan: golden parameter and KV sizes for a known shape, each term's scaling, refusals."""
import pytest

from tasks.training.plan import GIB, SHAPES, Hardware, Shape, Workload, plan_rl

QWEN3_8B = Shape.from_hf_config(SHAPES["qwen3-8b"])
PAPER = Workload(prompts_per_step=128, rollouts_per_prompt=8, micro_batch_tokens=36864, prompt_tokens=4096,
                 max_tokens=32768)


def test_qwen3_8b_shape_has_its_published_size():
    assert QWEN3_8B.params == pytest.approx(8.19e9, rel=0.01)      # "8.2B" on the model card
    assert QWEN3_8B.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2      # K and V, bf16


def test_tiny_preset_matches_the_model_it_makes():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.models.presets import PRESETS

    cfg = {**PRESETS["tiny"].to_dict(), "model_type": "qwen2"}
    model = Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"].to_dict()))
    assert Shape.from_hf_config(cfg).params == sum(p.numel() for p in model.parameters())


def test_fsdp_divides_the_parameter_state_by_the_ranks():
    one = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=1, strategy="fsdp"))
    eight = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, strategy="fsdp"))
    state = {"weights (fp32)", "gradients (fp32)", "AdamW moments (fp32)"}
    for (what, a), (_, b) in zip(one.lines, eight.lines):
        if what in state:
            assert b == pytest.approx(a / 8)
    assert sum(g for w, g in one.lines if w in state) == pytest.approx(16 * QWEN3_8B.params / GIB)


def test_activations_and_logits_grow_linearly_with_the_micro_batch_tokens():
    short = plan_rl(QWEN3_8B, Workload(1, 8, 4096, 1024, 3072), Hardware(nproc=8, strategy="fsdp"))
    long = plan_rl(QWEN3_8B, Workload(1, 8, 8192, 2048, 6144), Hardware(nproc=8, strategy="fsdp"))
    for (what, a), (_, b) in zip(short.lines, long.lines):
        if what.startswith("activations"):
            assert b == pytest.approx(2 * a)


def test_the_paper_run_fits_eight_80gb_gpus_with_fsdp_and_a_sleeping_engine():
    plan = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, strategy="fsdp"))
    assert plan.refusal is None and plan.peak_gib < 80 and plan.concurrent_sequences >= 1
    assert plan.tokens_per_step == 128 * 8 * (4096 + 32768)
    assert "fits" in plan.render()


@pytest.mark.parametrize("hw, largest", [
    (Hardware(nproc=8, strategy="ddp"), "AdamW moments"),
    (Hardware(nproc=8, strategy="fsdp", gradient_checkpointing=False), "activations"),
    (Hardware(nproc=8, strategy="fsdp", engine_sleeps=False, gpu_memory_utilization=0.6), "engine"),
])
def test_a_plan_that_cannot_fit_is_refused_naming_its_largest_term(hw, largest):
    plan = plan_rl(QWEN3_8B, PAPER, hw)
    assert plan.refusal and f"largest: {largest}" in plan.refusal and "\n" not in plan.refusal


def test_a_kv_cache_too_small_for_one_sequence_is_refused():
    plan = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, strategy="fsdp", gpu_memory_utilization=0.21))
    assert plan.refusal and plan.refusal.startswith("the engine's KV cache")


def test_tensor_parallelism_splits_the_kv_heads_over_the_engines_gpus():
    assert QWEN3_8B.kv_bytes_per_token_per_gpu(2) * 2 == QWEN3_8B.kv_bytes_per_token
    assert QWEN3_8B.kv_bytes_per_token_per_gpu(16) * 8 == QWEN3_8B.kv_bytes_per_token   # 8 heads: replicated
    one = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, strategy="fsdp", tp=1))
    two = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, strategy="fsdp", tp=2))
    assert two.kv_cache_gib > one.kv_cache_gib and two.concurrent_sequences > 2 * one.concurrent_sequences


def test_a_refusal_suggests_only_changes_that_lower_the_peak():
    ddp = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, strategy="ddp")).refusal
    fsdp = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, strategy="fsdp", engine_sleeps=False,
                                             gpu_memory_utilization=0.6)).refusal
    assert ddp.endswith("try --strategy fsdp or shorter responses")
    assert fsdp.endswith("try more GPUs, an engine that sleeps during the update or shorter responses")


def test_without_an_engine_fsdp_ranks_keep_an_unsharded_copy_to_generate_with():
    hw = Hardware(nproc=8, strategy="fsdp", engine=False)
    lines = dict(plan_rl(QWEN3_8B, PAPER, hw).lines)
    assert lines["rollout copy of the policy (fp32)"] == pytest.approx(4 * QWEN3_8B.params / GIB)
    ddp = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, engine=False))   # replicas generate with the policy itself
    assert "rollout copy of the policy (fp32)" not in dict(ddp.lines)

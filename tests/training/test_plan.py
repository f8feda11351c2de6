"""The RL memory plan: golden parameter and KV sizes for a known shape, each term's scaling, refusals."""
import pytest

from tasks.training.plan import GIB, SHAPES, Hardware, Shape, Workload, plan_rl

QWEN3_8B = Shape.from_hf_config(SHAPES["qwen3-8b"])
PAPER = Workload(prompts_per_step=128, rollouts_per_prompt=8, micro_batch_tokens=36864, prompt_tokens=4096,
                 max_tokens=32768)


def test_qwen3_8b_shape_has_its_published_size():
    assert QWEN3_8B.params == pytest.approx(8.19e9, rel=0.01)      # "8.2B" on the model card
    assert QWEN3_8B.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2      # K and V, bf16


def test_qwen3_8b_block_and_root_by_hand():
    # block: q 4096·4096 + k, v 2·4096·1024 + o 4096·4096 + q/k norms 2·128 + SwiGLU 3·4096·12288 + 2 norms 2·4096
    #      = 16,777,216 + 8,388,608 + 16,777,216 + 256 + 150,994,944 + 8,192 = 192,946,432
    # root: embeddings and untied output 2·151,936·4096 + final norm 4096 = 1,244,663,808
    # all:  36 · 192,946,432 + 1,244,663,808 = 8,190,735,360
    assert QWEN3_8B.block_params == 192_946_432
    assert QWEN3_8B.root_params == 1_244_663_808
    assert QWEN3_8B.params == 8_190_735_360


# The paper run's per-GPU terms in GiB, by hand (P = 8,190,735,360, B = 192,946,432, R = 1,244,663,808,
# 1 GiB = 2^30 bytes); every micro-batch reduce-scatters its gradients into the shards, so none accumulate
# unsharded whatever the micro-batches per optimizer step:
#   weights 4P/N: 3.8141 (N = 8), 1.9071 (N = 16); gradients the same; AdamW 8P/N: 7.6282, 3.8141
#   gathered blocks 2·2·B = 771,785,728 B = 0.7188; root gathered 2·R = 2,489,327,616 B = 2.3184
#   root gradients in flight (bf16 + fp32) 6R = 7,467,982,848 B = 6.9551
#   activations 2 · 36,864 · (36·4096 + 7·4096 + 2·1024 + 4·12288) = 2 · 36,864 · 227,328 = 16,760,438,784 B
#     = 15.6094
#   log-prob chunk 8 · 4096 · 151,936 = 4,978,638,848 B = 4.6367 (the output layer is the gathered bf16 root)
#   trainer: 16P/N + 0.7188 + 2.3184 + 6.9551 + 15.6094 + 4.6367 = 45.4948 (N = 8), 37.8666 (N = 16)
#   generation: 12P/N + 0.5 · 80 = 11.4423 + 40 = 51.4423 (N = 8), 5.7212 + 40 = 45.7212 (N = 16): the peak
PAPER_GIB = {8: (45.4948, 51.4423), 16: (37.8666, 45.7212)}


@pytest.mark.parametrize("nproc", [8, 16])
def test_the_paper_run_per_gpu_by_hand(nproc):
    plan = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=nproc, strategy="fsdp"))
    lines = dict(plan.lines)
    assert lines["fsdp gathered blocks (bf16)"] == pytest.approx(0.7188, abs=1e-4)
    assert lines["fsdp root gathered (bf16)"] == pytest.approx(2.3184, abs=1e-4)
    assert lines["fsdp root gradients in flight"] == pytest.approx(6.9551, abs=1e-4)
    assert "fsdp unsharded gradients (fp32)" not in lines
    assert lines["activations (bf16)"] == pytest.approx(15.6094, abs=1e-4)
    assert lines["log-prob chunk (fp32)"] == pytest.approx(4.6367, abs=1e-4)
    trainer, generation = PAPER_GIB[nproc]
    assert plan.trainer_gib == pytest.approx(trainer, abs=1e-3)
    assert plan.generation_gib == pytest.approx(generation, abs=1e-3)
    assert plan.peak_gib == plan.generation_gib and plan.refusal is None


def test_the_trainer_state_stays_on_the_gpu_while_the_engine_generates():
    """16 GPUs, the engine at 0.85 of 80 GiB: generation = 12P/16 + 68 = 5.7212 + 68 = 73.7212 GiB passes the
    update's 37.87 and is the peak; at 0.95 (5.7212 + 76 = 81.72) it passes 80 GiB, the engine named."""
    plan = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=16, strategy="fsdp", gpu_memory_utilization=0.85))
    assert plan.peak_gib == plan.generation_gib == pytest.approx(73.7212, abs=1e-3) and plan.refusal is None
    plan = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=16, strategy="fsdp", gpu_memory_utilization=0.95))
    assert plan.refusal and "largest: engine 76.0 GiB" in plan.refusal


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


def test_without_an_engine_a_rank_keeps_a_copy_to_generate_with_when_sharded_or_bf16():
    """fsdp ranks keep an unsharded copy (a sharded module cannot generate alone), a bf16 update a bf16 copy
    (rl_engine.make_rollout_engine); only fp32 replicas generate with the policy itself."""
    hw = Hardware(nproc=8, strategy="fsdp", engine=False)
    lines = dict(plan_rl(QWEN3_8B, PAPER, hw).lines)
    assert lines["rollout copy of the policy (bf16)"] == pytest.approx(2 * QWEN3_8B.params / GIB)
    fp32 = dict(plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, strategy="fsdp", engine=False, bf16=False)).lines)
    assert fp32["rollout copy of the policy (fp32)"] == pytest.approx(4 * QWEN3_8B.params / GIB)
    assert fp32["fsdp gathered blocks (fp32)"] == pytest.approx(2 * lines["fsdp gathered blocks (bf16)"])
    ddp = dict(plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, engine=False)).lines)  # bf16: a copy too
    assert ddp["rollout copy of the policy (bf16)"] == pytest.approx(2 * QWEN3_8B.params / GIB)
    ddp_fp32 = plan_rl(QWEN3_8B, PAPER, Hardware(nproc=8, engine=False, bf16=False))
    assert not any(w.startswith("rollout copy") for w in dict(ddp_fp32.lines))


# The transformers engine's decode batch for Qwen2.5-0.5B (24 layers, 14 heads, 2 KV heads of 64, hidden 896,
# MLP 4864, V = 151,936), 16 prompts × 8 of 128 + 1,024 tokens, bf16 copy, by hand (decode_memory.py):
#   decode phase: KV 2·24·2·64·1,152·2 = 14,155,776 + KV/(8·24) 73,728 + step buffers 151,936·36 = 5,469,696
#   + records 12·1,024 = 12,288 → 19,711,488 bytes a row (the prefill phase, 2,467,840, is smaller);
#   128 rows 2,523,070,464 B = 2.3498 GiB, all at once on an 80 GiB GPU
QWEN25_05B = Shape.from_hf_config(SHAPES["qwen2.5-0.5b"])
BENCH = Workload(prompts_per_step=16, rollouts_per_prompt=8, micro_batch_tokens=16384, prompt_tokens=128,
                 max_tokens=1024)


def test_the_transformers_engines_decode_batch_is_planned():
    plan = plan_rl(QWEN25_05B, BENCH, Hardware(nproc=1, engine=False))
    assert plan.concurrent_sequences == 128 and plan.rank_rollouts == 128
    assert plan.kv_cache_gib == pytest.approx(128 * 19_711_488 / GIB)
    copy = 2 * QWEN25_05B.params / GIB
    assert plan.engine_gib == pytest.approx(copy + plan.kv_cache_gib)
    assert plan.generation_gib == pytest.approx(12 * QWEN25_05B.params / GIB + plan.engine_gib)
    assert plan.peak_gib == pytest.approx(max(plan.trainer_gib, plan.generation_gib))
    assert "128 of a rank's 128 rollouts at once" in plan.render()


def test_the_decode_batch_is_cut_to_whole_prompts_in_the_engines_share():
    """A 4 GiB GPU: its share 2 GiB less the 0.92 GiB bf16 copy holds 7 prompts' rows of this workload at
    once (56 of 128); a share that cannot hold one prompt's rows is refused, as the engine refuses it."""
    small = plan_rl(QWEN25_05B, BENCH, Hardware(gpu_memory_gib=4.0, nproc=1, engine=False))
    budget = int(0.5 * 4 * GIB) - 2 * QWEN25_05B.params
    assert small.concurrent_sequences == 8 * (budget // (8 * 19_711_488)) == 56
    long = Workload(prompts_per_step=16, rollouts_per_prompt=8, micro_batch_tokens=16384, prompt_tokens=128,
                    max_tokens=131072)
    refused = plan_rl(QWEN25_05B, long, Hardware(gpu_memory_gib=4.0, nproc=1, engine=False)).refusal
    assert refused.startswith("the transformers engine's memory budget (1.08 GiB) cannot hold one prompt's 8 rows")



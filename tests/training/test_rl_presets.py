"""The paper's RL presets and the dry run: valid configs, the paper's numbers, the plan of the run shape
they are meant for (fits with fsdp, refused with ddp), a model directory planned from config.json alone,
bad model arguments in one line."""
import json
import pytest

from tasks.training.config import RLConfig
from tasks.training.dry_run import DEFAULT_PROMPT_TOKENS, dry_run
from tasks.training.plan import GIB, SHAPES, Hardware, Shape
from tasks.training.rl_presets import RL_PRESETS


@pytest.mark.parametrize("name", sorted(RL_PRESETS))
def test_every_preset_is_a_valid_rl_config_for_a_known_shape(name):
    preset = RL_PRESETS[name]
    cfg = RLConfig(**preset.config)                 # __post_init__ checks every value
    assert preset.model in SHAPES and preset.rl_config() == cfg


def test_the_paper_presets_hold_the_papers_rl_numbers():
    math, code = RL_PRESETS["paper"].rl_config(), RL_PRESETS["paper-code"].rl_config()
    for cfg in (math, code):
        assert (cfg.loss, cfg.eps_low, cfg.eps_high, cfg.sft_alpha) == ("gppo", 0.2, 0.28, 0.1)
        assert (cfg.prompts_per_step, cfg.rollouts_per_prompt, cfg.max_tokens) == (128, 8, 32768)
        assert cfg.generated_prompts == 256  # the generation batch: 2× oversampled, zero-variance groups dropped
        assert cfg.fixed_mini_batch  # 16 (math) / 32 (code) prompts a mini-batch, whatever the filter left
        assert (cfg.temperature, cfg.top_p, cfg.warmup_steps, cfg.weight_decay) == (1.0, 1.0, 10, 0.1)
        assert (cfg.backend, cfg.strategy) == ("vllm", "fsdp") and cfg.dual_clip is None and cfg.filter_zero_variance
    assert (math.mini_batches, math.lr, math.domains) == (8, 1e-6, ("math",))
    assert (code.mini_batches, code.lr, code.domains) == (4, 5e-7, ("code",))
    from tasks.training.rl_data import select_problem

    def fate(domain, passed):  # a problem tagged with 16 samples, `passed` of them correct
        row = {"domain": domain, "answer": "1", "tests": '{"inputs": ["1"], "outputs": ["1"]}',
               "pass_rate": passed / 16}
        return select_problem(row, ("math", "code"), math.selection)
    assert (fate("math", 8), fate("math", 9)) == ("below_window", "kept")  # math: a majority of 16
    assert (fate("code", 7), fate("code", 8)) == ("below_window", "kept")  # code: pass rate ≥ 0.5
    assert RL_PRESETS["paper-math"].config == RL_PRESETS["paper"].config
    hw = RL_PRESETS["paper"].hardware
    assert (hw.nproc, hw.strategy, hw.gpu_memory_gib, hw.tp) == (8, "fsdp", 80.0, 1)


def test_the_paper_preset_fits_eight_80gib_gpus_with_fsdp():
    preset = RL_PRESETS["paper"]
    plan = dry_run(preset.model, preset.rl_config(), preset.hardware)
    assert plan.refusal is None and plan.peak_gib < 80 and plan.concurrent_sequences >= 1
    assert plan.tokens_per_step == 256 * 8 * (DEFAULT_PROMPT_TOKENS + 32768)  # generated: 256 prompts drawn
    text = plan.render()
    assert text.splitlines()[0].startswith("qwen3-8b (vllm rollouts): 8.19B parameters on 8 × 80 GiB GPUs, fsdp")
    assert text.endswith("fits")


def test_the_paper_preset_with_ddp_is_refused_naming_its_largest_term():
    preset = RL_PRESETS["paper"]
    plan = dry_run(preset.model, preset.rl_config(strategy="ddp"), preset.hardware)
    assert plan.refusal and "largest: AdamW moments" in plan.refusal and "\n" not in plan.refusal
    assert "try --strategy fsdp" in plan.refusal
    assert plan.render().splitlines()[-1] == f"refused: {plan.refusal}"


def test_four_full_rollouts_per_micro_batch_do_not_fit_the_paper_shape():
    """One 36K-token rollout per pass needs 45.5 GiB in the update (test_plan.py by hand; generation's 51.4 is
    the peak); each more adds 15.6 GiB of activations: four need 45.4948 + 3 · 15.6094 = 92.32 GiB, past 80,
    the activations (62.4 GiB) the largest term."""
    preset = RL_PRESETS["paper"]
    assert dry_run(preset.model, preset.rl_config(), preset.hardware).refusal is None
    plan = dry_run(preset.model, preset.rl_config(micro_batch_tokens=4 * 36864), preset.hardware)
    assert plan.refusal and "needs 92.3 GiB" in plan.refusal and "largest: activations" in plan.refusal


@pytest.fixture()
def config_only_model(tmp_path):
    """A model directory of the tiny preset's shape: its config.json and a weights file that is not
    loadable, so a planner that opened the weights would fail."""
    from tasks.models.presets import PRESETS

    d = tmp_path / "tiny-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**PRESETS["tiny"].to_dict(), "model_type": "qwen2"}))
    (d / "model.safetensors").write_bytes(b"not a safetensors file")
    return d


def test_a_model_directory_is_planned_from_its_config_json_alone(config_only_model):
    cfg = RLConfig(backend="hf")
    plan = dry_run(str(config_only_model), cfg, Hardware(gpu_memory_gib=24.0))
    shape = Shape.from_hf_config(json.loads((config_only_model / "config.json").read_text()))
    assert dict(plan.lines)["weights (fp32)"] == pytest.approx(4 * shape.params / GIB)
    assert plan.refusal is None
    title = plan.render().splitlines()[0]
    assert title.startswith(f"{config_only_model} (hf rollouts)")
    # the context (1024) minus max_tokens (256) caps the default prompt; the micro-batch keeps its budget
    assert "micro-batch ≤ 16,384 tokens packed; rollouts of ≤ 1,024 tokens (prompt 768 + response 256)" in title
    assert "the policy generates (transformers), 128 of a rank's 128 rollouts at once" in plan.render()
    assert plan.engine_gib == pytest.approx(2 * shape.params / GIB + plan.kv_cache_gib)  # bf16 copy + decode


def test_the_datas_longest_prompt_and_a_full_mini_batch_bound_the_workload(config_only_model):
    cfg = RLConfig(micro_batch_tokens=10**6, strategy="fsdp")  # 16·8 rollouts in 2 mini-batches: 64 at most
    plan = dry_run(str(config_only_model), cfg, Hardware(nproc=2, strategy="ddp"), prompt_tokens=100)
    assert "fsdp" in plan.title and "micro-batch ≤ 22,784 tokens packed; rollouts of ≤ 356 tokens" in plan.title
    assert plan.engine_gib > 0    # backend "auto": vLLM, as on the GPUs a plan is for


def test_a_context_with_no_room_for_a_prompt_is_refused(config_only_model):
    plan = dry_run(str(config_only_model), RLConfig(max_tokens=1024), Hardware())
    assert plan.refusal.startswith("max_tokens 1,024 leaves no room for a prompt")


@pytest.mark.parametrize("make", [lambda tmp: "qwen-9000", lambda tmp: str(tmp)])
def test_a_bad_model_argument_is_one_line_naming_it_and_the_known_shapes(tmp_path, make):
    model = make(tmp_path)          # an unknown name, a directory without config.json
    with pytest.raises(ValueError) as e:
        dry_run(model, RLConfig(), Hardware())
    msg = str(e.value)
    assert "\n" not in msg and repr(model) in msg and "known: qwen3-8b" in msg


def test_a_config_json_that_is_no_decoder_config_is_one_line(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ValueError, match="config.json lacks a usable 'num_attention_heads'"):
        dry_run(str(tmp_path), RLConfig(), Hardware())
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(ValueError, match="not readable JSON"):
        dry_run(str(tmp_path), RLConfig(), Hardware())

"""Config types check themselves (the CLI and deployments share the message), and the CLI's defaults are
the config types' defaults."""
import dataclasses
import math

import pytest

from tasks.config_checks import ConfigError
from tasks.curation.config import CurateConfig
from tasks.evaluation.config import DifficultyConfig, EvalConfig
from tasks.generation.sampling import Sampling
from tasks.grading.rewards import RewardConfig
from tasks.training.config import RLConfig, SelectionConfig, SFTConfig


@pytest.mark.parametrize("cls, kw, message", [
    (SFTConfig, {"epochs": 0}, "epochs (--epochs) must be at least 1"),
    (SFTConfig, {"max_steps": -1}, "max_steps (--max-steps) must be at least 1"),
    (SFTConfig, {"lr": math.inf}, "lr (--lr) must be a finite number"),
    (SFTConfig, {"lr": 0.0}, "lr (--lr) must be above 0.0"),
    (SFTConfig, {"batch_size": 0}, "batch_size (--batch-size) must be at least 1"),
    (SFTConfig, {"micro_batch_size": 9, "batch_size": 4}, "micro_batch_size (--micro-batch-size) must not exceed"),
    (SFTConfig, {"seq_len": 1}, "seq_len (--seq-len) must be at least 8"),
    (SFTConfig, {"save_every": 0}, "save_every (--save-every) must be at least 1"),
    (SFTConfig, {"seed": -1}, "seed (--seed) must be at least 0"),
    (SFTConfig, {"seed": 10 ** 20}, f"seed (--seed) must be at most {(1 << 63) - 1}"),
    (RLConfig, {"seed": 10 ** 20}, f"seed (--seed) must be at most {(1 << 63) - 1}"),
    (SFTConfig, {"strategy": "zero3"}, "strategy (--strategy) must be one of ddp, fsdp"),
    (EvalConfig, {"k": 0}, "k (--k) must be at least 1"),
    (EvalConfig, {"k": 2 ** 70}, "k (--k) must be at most 4096"),
    (EvalConfig, {"temperature": math.nan}, "temperature (--temperature) must be a finite number"),
    (EvalConfig, {"max_tokens": -1}, "max_tokens (--max-tokens) must be at least 1"),
    (EvalConfig, {"backend": "tgi"}, "backend (--backend) must be one of auto, hf, vllm"),
    (DifficultyConfig, {"k": 0}, "k (--k) must be at least 1"),
    (DifficultyConfig, {"hard_below": 0.8, "easy_from": 0.5}, "easy_from (--easy-from) must be at least 0.8"),
    (DifficultyConfig, {"top_p": 0.0}, "top_p (--top-p) must be above 0.0"),
    (RLConfig, {"lr": -1.0}, "lr (--lr) must be above 0.0"),
    (RLConfig, {"loss": "ppo2"}, "loss (--loss) must be one of cispo, gppo, grpo"),
    (RLConfig, {"advantage": "rloo"}, "advantage (--advantage) must be one of"),
    (RLConfig, {"rollouts_per_prompt": 1}, "rollouts_per_prompt (--rollouts-per-prompt) must be at least 2"),
    (RLConfig, {"steps": 0}, "steps (--steps) must be at least 1"),
    (RLConfig, {"mini_batches": 9, "prompts_per_step": 1, "rollouts_per_prompt": 8}, "mini_batches (--mini-batches) must not exceed the 8 rollouts"),
    (RLConfig, {"domains": ("math", "poetry")}, "domains (--domains) must be a non-empty list"),
    (RLConfig, {"domains": ()}, "domains (--domains) must be a non-empty list"),
    (RLConfig, {"backend": "tgi"}, "backend (--backend) must be one of auto, hf, vllm"),
    (RLConfig, {"strategy": "zero3"}, "strategy (--strategy) must be one of ddp, fsdp"),
    (RLConfig, {"eval_benchmark": "/no/such/bench.jsonl"}, "eval_benchmark (--eval-benchmark) names no existing file"),
    (RLConfig, {"temperature": -0.1}, "temperature (--temperature) must be at least 0.0"),
    (SelectionConfig, {"math_min": 0.6, "math_max": 0.5}, "math_max (--math-max) must be at least 0.6"),
    (SelectionConfig, {"untagged": "maybe"}, "untagged (--untagged) must be one of exclude, keep"),
    (RewardConfig, {"correct": -1.0, "wrong": 1.0}, "correct (--correct) must be above the wrong-answer reward"),
    (RewardConfig, {"code_mode": "partial"}, "code_mode (--code-mode) must be one of hard, soft"),
])
def test_bad_values_are_refused_with_the_field_and_flag(cls, kw, message):
    with pytest.raises(ConfigError) as exc:
        cls(**kw)
    assert str(exc.value).startswith(message), str(exc.value)


def test_micro_batch_defaults_to_fit_the_batch():
    assert SFTConfig(batch_size=4).micro_batch_size == 4
    assert SFTConfig().micro_batch_size == 8 and SFTConfig(batch_size=16, micro_batch_size=2).micro_batch_size == 2


def test_rl_domains_from_json_become_a_tuple():
    assert RLConfig(domains=["math"]).domains == ("math",)


@pytest.mark.parametrize("cls", [EvalConfig, DifficultyConfig, RLConfig])
def test_every_sampling_stage_shares_one_sampling_type(cls):
    assert issubclass(cls, Sampling)
    top_p = 1.0 if cls.__name__ == "RLConfig" else 0.9  # RL refuses a nucleus (RLConfig.check_scored_sampling)
    cfg = cls(temperature=0.5, top_p=top_p, max_tokens=17, seed=3)
    p = cfg.sampling_params(4)
    assert (p.n, p.temperature, p.top_p, p.max_tokens, p.seed) == (4, 0.5, top_p, 17, 3)


def test_rl_refuses_sampling_the_update_would_not_score():
    from tasks.config_checks import ConfigError
    from tasks.training.config import RLConfig

    for kw, field in [({"top_p": 0.9}, "top_p"), ({"temperature": 0.0}, "temperature"),
                      ({"temperature": 0.7, "old_logprobs": "rollout"}, "old_logprobs")]:
        with pytest.raises(ConfigError) as e:
            RLConfig(**kw)
        assert e.value.field == field and "\n" not in e.value.message
    assert RLConfig(temperature=0.7).temperature == 0.7  # the update scores softmax(z / 0.7)


def _cli_params(command: str) -> dict:
    import typer

    from flows.cli import app

    click_app = typer.main.get_command(app)
    return {p.name: p.default for p in click_app.commands[command].params}


@pytest.mark.parametrize("command, cls, renamed", [
    ("sft", SFTConfig, {}),
    ("eval", EvalConfig, {}),
    ("tag-difficulty", DifficultyConfig, {}),
    ("rl", RLConfig, {}),
    ("ablate", RLConfig, {}),
    ("curate", CurateConfig, {}),
])
def test_cli_defaults_are_the_config_defaults(command, cls, renamed):
    defaults = cls() if cls is not CurateConfig else CurateConfig(sources=[{"name": "a", "path": "a.jsonl"}])
    fields = {f.name for f in dataclasses.fields(cls)}
    checked = 0
    for name, default in _cli_params(command).items():
        field = renamed.get(name, name)
        if field not in fields or field in ("store", "sources", "benchmarks"):
            continue
        want = getattr(defaults, field)
        want = ",".join(want) if isinstance(want, tuple) else want
        if cls is SFTConfig and field == "micro_batch_size":  # derived from batch_size after construction
            want = None
        assert default == want, f"klear {command} --{name.replace('_', '-')} defaults to {default!r}, {cls.__name__} to {want!r}"
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("kw, message", [
    ({"demo_scale": 0.01}, "demo_scale (--scale) must be at least 0.02 (got 0.01)"),
    ({"eval_k": 0}, "eval_k must be at least 1"),
    ({"difficulty_k": -1}, "difficulty_k must be at least 0"),
    ({"model_preset": "huge"}, "model_preset must be one of tiny, small"),
    ({"demo": False}, "sources must name at least one"),
    ({"demo": False, "sources": {"a": "/no/such.jsonl"}}, "sources a=/no/such.jsonl: no such file"),
    ({"sources": {"a": "a.jsonl"}}, "demo is on: the run would curate the bundled demo data and ignore your sources;"),
    ({"benchmarks": {"b": "b.jsonl"}}, "demo is on: the run would curate the bundled demo data and ignore your benchmarks;"),
])
def test_pipeline_config_checks_itself(kw, message):
    from tasks.pipeline.config import PipelineConfig

    with pytest.raises(ConfigError) as exc:
        PipelineConfig(**kw)
    assert str(exc.value).startswith(message), str(exc.value)


def test_a_partial_sft_or_rl_mapping_keeps_the_pipeline_defaults_it_leaves_out():
    """`sft: {epochs: 1}` in a config file or a deployment's parameters changes the epochs of the SFT the template
    shows, not of SFTConfig's own defaults (another lr, batch and pack length); with a base model, of the
    pretrained sizing."""
    from pydantic import TypeAdapter

    from tasks.pipeline.config import PipelineConfig, demo_rl, pretrained_sft

    adapter = TypeAdapter(PipelineConfig)
    cfg = adapter.validate_python({"sft": {"epochs": 1}, "rl": {"steps": 3}})
    assert cfg.sft == dataclasses.replace(PipelineConfig().sft, epochs=1)
    assert cfg.rl == dataclasses.replace(demo_rl(), steps=3)
    cfg = adapter.validate_python({"demo_scale": 0.05, "rl": {"lr": 1e-5}})
    assert cfg.rl == dataclasses.replace(demo_rl(0.05), lr=1e-5)
    # `rl` left out is sized to demo_scale as an empty `rl` is (and as `klear pipeline --scale` sizes it)
    assert adapter.validate_python({"demo_scale": 0.05}).rl == adapter.validate_python({"demo_scale": 0.05, "rl": {}}).rl == demo_rl(0.05)
    base = adapter.validate_python({"base_model": "smollm2-135m-instruct", "sft": {"epochs": 2}})
    assert base.sft == dataclasses.replace(pretrained_sft(), epochs=2)
    with pytest.raises(Exception, match=r"sft\.epoch\b"):  # a misspelt key is still refused, not merged
        adapter.validate_python({"sft": {"epoch": 1}})


def test_a_demo_too_small_to_learn_is_said_to_be_one():
    from tasks.curation.demo_data import LEARNING_SCALE
    from tasks.pipeline.config import PipelineConfig

    assert "learns from demo scale 0.5" in PipelineConfig(demo_scale=0.25).scale_note()
    assert PipelineConfig(demo_scale=LEARNING_SCALE).scale_note() is None
    assert PipelineConfig().scale_note() is None


def test_the_demo_rl_shrinks_only_below_the_scale_that_learns():
    from tasks.pipeline.config import PipelineConfig, demo_rl

    assert [demo_rl(s).steps for s in (0.02, 0.05, 0.25, 0.5, 1.0, 4.0)] == [2, 2, 10, 20, 20, 20]
    assert demo_rl() == PipelineConfig().rl


def test_pipeline_config_checks_its_benchmark_and_base_model(tmp_path):
    from tasks.pipeline.config import PipelineConfig

    src = tmp_path / "s.jsonl"
    src.write_text('{"problem": "1+1?", "answer": "2"}\n')
    with pytest.raises(ConfigError, match=r"^eval_benchmark must be one of the benchmarks"):
        PipelineConfig(demo=False, sources={"s": str(src)}, benchmarks={"b": str(src)}, eval_benchmark="x")
    with pytest.raises(ConfigError, match=r"^base_model .*no config.json"):
        PipelineConfig(demo=False, sources={"s": str(src)}, benchmarks={"b": str(src)}, eval_benchmark="b",
                       base_model=str(tmp_path))


def test_the_reported_benchmark_is_the_only_one_given_or_must_be_named(tmp_path):
    from tasks.pipeline.config import PipelineConfig

    src = tmp_path / "s.jsonl"
    src.write_text('{"problem": "1+1?", "answer": "2"}\n')
    assert PipelineConfig().reported_benchmark == "bench_math"
    assert PipelineConfig(demo=False, sources={"s": str(src)}, benchmarks={"mine": str(src)}).reported_benchmark == "mine"
    with pytest.raises(ConfigError, match=r"^eval_benchmark must be one of the benchmarks \(a, b\) \(none named: "
                                          r"with several, say which one the table reports\)"):
        PipelineConfig(demo=False, sources={"s": str(src)}, benchmarks={"a": str(src), "b": str(src)})


def test_a_pipeline_benchmark_row_that_cannot_be_graded_stops_the_run_before_its_first_stage(tmp_path):
    """Not at the first evaluation, after curation, verification and SFT have run."""
    from tasks.pipeline.config import PipelineConfig

    src = tmp_path / "s.jsonl"
    src.write_text('{"problem": "1+1?", "answer": "2"}\n')
    bench = tmp_path / "b.jsonl"
    bench.write_text('{"problem": "2+2?", "answer": "4"}\n{"problem": "3+3?", "final": "6"}\n')
    with pytest.raises(ConfigError, match=r"^benchmarks b: .*b.jsonl row 2: answer is missing, null or empty .*"
                                          r"row has: problem, final"):
        PipelineConfig(demo=False, sources={"s": str(src)}, benchmarks={"b": str(bench)}, eval_benchmark="b")
    bench.write_text('{"problem": "2+2?", "answer": "4"}\n')
    assert PipelineConfig(demo=False, sources={"s": str(src)}, benchmarks={"b": str(bench)}, eval_benchmark="b")
    # a benchmark that only decontaminates needs no answers (a proof set): curation reads it leniently
    proofs = tmp_path / "proofs.jsonl"
    proofs.write_text('{"problem": "Prove that there are infinitely many primes."}\n')
    assert PipelineConfig(demo=False, sources={"s": str(src)}, benchmarks={"b": str(bench), "p": str(proofs)},
                          eval_benchmark="b")


def test_every_seed_takes_the_range_torch_takes():
    from types import SimpleNamespace

    from tasks.config_checks import MAX_SEED, check_seed

    for ok in (0, MAX_SEED):
        check_seed(SimpleNamespace(seed=ok))
    for bad, says in ((-1, "must be at least 0"), (MAX_SEED + 1, f"must be at most {MAX_SEED}"), (True, "integer")):
        with pytest.raises(ConfigError, match=says):
            check_seed(SimpleNamespace(seed=bad))
    assert MAX_SEED == (1 << 63) - 1

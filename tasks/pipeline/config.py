"""The end-to-end pipeline's typed config (doubles as the `pipeline` flow's parameters → a UI form).

Defaults are the demo: bundled data, tiny model, CPU, a budget of minutes on 2 cores. For real runs set
`demo=False`, give `sources`/`benchmarks`, a `base_model` directory and GPU-sized SFT/RL settings.

`gpu_pool=True` runs SFT, difficulty tagging, RL and the evaluations as child flow runs of the deployments
named in `gpu_deployments` (prefect.yaml puts them on the `klear-gpu` work pool); curation, verification
and the base model stay where the pipeline runs. The stages exchange store references only, so the store
must be a path (or URL) that both pools reach under the same name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from tasks.config_checks import STRICT_KEYS, ConfigError
from tasks.training.config import RLConfig, SFTConfig
from tasks.verification.strength import StrengthConfig


def _demo_sft() -> SFTConfig:
    # measured on the demo task (held-out bench_math avg@4, temperature 0.6): the arithmetic is learned late,
    # 7% after 1.7 epochs, 11% after 3.4, 20% after 5.2, 34% after 6.9, 53% after 8 (1858 steps of 8×256
    # packed tokens, ~0.12 s each on 2 idle cores); fewer epochs leave RL nothing to sharpen
    return SFTConfig(epochs=8, batch_size=8, micro_batch_size=8, seq_len=256, lr=3e-3, save_every=500)


def demo_rl(scale: float = 1.0) -> RLConfig:
    """The demo's RL: 20 steps of 16 prompts × 8 rollouts on math (code rewards of a tiny random-init model
    are all 0: zero-variance groups, dropped anyway). Its gain comes with steps, not rows (at scale 0.5:
    +2.5 points after 10 steps, +6.9 after 20), so the steps shrink only below the scale that learns
    (LEARNING_SCALE), where the run checks the stage: 20 · scale / LEARNING_SCALE, at least 2."""
    from tasks.curation.demo_data import LEARNING_SCALE

    steps = max(2, round(20 * min(1.0, scale / LEARNING_SCALE)))
    return RLConfig(steps=steps, prompts_per_step=16, rollouts_per_prompt=8, mini_batches=2, lr=1e-4,
                    max_tokens=160, save_every=10, domains=("math",))


def pretrained_sft() -> SFTConfig:
    """SFT of a pretrained base (`base_model` set, SFT left at the tiny demo's sizing): a few passes at a
    fine-tuning lr. The tiny demo's lr 3e-3 over 8 epochs teaches a random-init model arithmetic and would
    wipe out what a pretrained one knows. Measured with SmolLM2-135M-Instruct on the demo data at scale 0.05
    (docs/benchmarks.md): lr 5e-5 and about one pass take held-out avg@4 from 0.03 to 0.46; 512-token packs
    hold its chat template around the demo's longest examples."""
    return SFTConfig(epochs=1, batch_size=8, micro_batch_size=4, seq_len=512, lr=5e-5, save_every=500)


def pretrained_rl() -> RLConfig:
    """RL of a pretrained base (`base_model` set, RL left at the demo's sizing), sized for a CPU: 4 steps of
    4 prompts × 4 rollouts at lr 1e-6 (a 135M model samples ≈ 150 tokens/s on 2 cores, so the demo's 20 × 16
    × 8 rollouts would take hours); on a GPU give your own `rl` (the paper's: tasks/training/rl_presets.py)."""
    return RLConfig(steps=4, prompts_per_step=4, rollouts_per_prompt=4, mini_batches=1, lr=1e-6,
                    max_tokens=160, save_every=10, domains=("math",))


@dataclass
class PipelineSource:
    """One source of the pipeline with its layout: what `klear curate --source NAME=PATH --layout NAME=LAYOUT
    --map NAME.RAW=FIELD --domain NAME=DOMAIN` says about it (tasks/curation/config.SourceSpec, named by its
    key in `sources`). A raw OpenR1, TACO, Numina or LiveCodeBench file goes through the pipeline as it goes
    through `klear curate`."""
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)
    path: str                             # a .jsonl or .parquet file (local or fsspec URL), or hf:DATASET[:SPLIT]
    layout: str = "canonical"             # its field layout (klear curate --layout; canonical: our schema)
    field_map: dict[str, str] = field(default_factory=dict)  # extra renames {raw field: canonical field}
    domain: str | None = None             # math or code, for rows that carry none


def source_spec(name: str, value: "str | PipelineSource | dict") -> dict:
    """`sources[name]` as the curate flow's source (SourceSpec fields): a PATH alone is the canonical layout."""
    if isinstance(value, str):
        return {"name": name, "path": value}
    fields = value if isinstance(value, dict) else value.__dict__
    return {"name": name, **{k: v for k, v in fields.items()}}


def with_nested_defaults(values: object) -> object:
    """A settings mapping (a config file's, a deployment's parameters) whose `sft` or `rl` is a partial mapping,
    completed from the defaults the pipeline shows for them (`klear pipeline --print-config`: "absent: the
    default shown"), not from SFTConfig's and RLConfig's own: `sft: {epochs: 1}` keeps the demo's lr, packs
    and batch. With a `base_model` the keys left out come from the pretrained sizing (pretrained_sft,
    pretrained_rl); `rl` from demo_rl at the mapping's `demo_scale`, as `klear pipeline --scale` sizes it —
    also when `rl` is left out, so `{demo_scale: 0.05}` and `{demo_scale: 0.05, rl: {}}` are one run.
    Anything else (a config instance, a value of the wrong type) is left to validation as it is."""
    import dataclasses
    import math

    if not isinstance(values, dict):
        return values
    pretrained = bool(values.get("base_model"))
    scale = values.get("demo_scale", 1.0)
    scale = scale if isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0 else 1.0
    bases = {"sft": pretrained_sft if pretrained else _demo_sft,
             "rl": pretrained_rl if pretrained else (lambda: demo_rl(scale))}
    out = dict(values)
    for key, base in bases.items():
        given = values.get(key, {} if key == "rl" and not pretrained and "demo_scale" in values else None)
        if isinstance(given, dict):
            shown = base()
            out[key] = {**{f.name: getattr(shown, f.name) for f in dataclasses.fields(shown)}, **given}
    return out


# stage → "FLOW/DEPLOYMENT" run when gpu_pool is on (the deployments of prefect.yaml on klear-gpu)
GPU_DEPLOYMENTS = {"sft": "sft/default", "tag-difficulty": "tag-difficulty/default", "rl": "rl/default",
                   "evaluate": "evaluate/default"}


@dataclass
class PipelineConfig:
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)
    store: str | None = None                      # default $KLEAR_STORE or ./klear-store
    demo: bool = True                             # generate the bundled demo sources + benchmarks
    demo_scale: float = 1.0                       # size of the bundled data, so of curation, SFT and tags
    #   (tests use a small fraction); `klear pipeline --scale` also sizes RL's steps (demo_rl)
    sources: dict[str, str | PipelineSource] = field(default_factory=dict)  # NAME → PATH, or NAME → {path,
    #   layout, field_map, domain} for a raw file in another layout (klear curate's --layout); demo=False
    benchmarks: dict[str, str] = field(default_factory=dict)   # NAME → PATH, decontamination + evaluation
    eval_benchmark: str | None = None             # which benchmark the base/SFT/RL table reports; None: the
    #   demo's bench_math, or with your own data the only one of `benchmarks` (several: name one)
    min_tests: int = 16                           # verify: code problems with fewer tests are dropped
    test_strength: StrengthConfig = field(default_factory=StrengthConfig)  # verify: mutants of each passing
    #   reference; problems whose tests accept wrong programs are dropped (`weak_tests`): the default drops,
    #   because RL rewards whatever the tests accept, so weak tests pay wrong programs (StrengthConfig says
    #   why each number); weak_tests="tag" keeps them, flagged in `verifications`
    base_model: str | None = None                 # an HF model dir, a pretrained model's name (klear model
    #   list) or a Hub id, fetched once; None: `klear model init` tiny preset. With a base model, `sft` and `rl`
    #   left at the tiny demo's sizing take the pretrained sizing (pretrained_sft, pretrained_rl) instead
    model_preset: str = "tiny"                    # the base model's size when base_model is None
    seed: int = 0                                 # demo data, base model, curation's MinHash, sampling
    sft: SFTConfig = field(default_factory=_demo_sft)  # SFT settings (the demo's: 8 epochs of 8 × 256 tokens)
    sft_nproc: int = 1                            # above 1: SFT as a torchrun subprocess over that many GPUs/ranks
    #   (sft.strategy "ddp" or "fsdp"); not part of the SFT stage's content key
    difficulty_k: int = 2                         # samples per problem for difficulty tags (0: skip)
    rl: RLConfig = field(default_factory=demo_rl)  # RL settings (the demo's: 20 steps of GPPO on math)
    rl_nproc: int = 1                             # above 1: RL as a torchrun subprocess over that many GPUs/ranks
    #   (rl.strategy "ddp" or "fsdp"); not part of the RL stage's content key
    rl_code: RLConfig | None = None               # a second RL stage from the first's checkpoint (the paper:
    #   math RL, then code RL with its own lr, mini-batches, domains and pass-rate window), evaluated too;
    #   None: one stage. The demo keeps one (math): a tiny model's code rewards are all wrong answers, so
    #   every code group has zero variance and a code stage would train nothing
    eval_k: int = 4                               # samples per held-out problem (avg@k, pass@k)
    eval_max_tokens: int = 160                    # response budget of difficulty tags and evaluations
    strict: bool = False                          # fail the run where it would warn that data was lost or
    #   misread whole (a source whose rows carry a field its layout does not read; a source with no row kept;
    #   a source whose math rows have no answer: tasks/pipeline/data_alarms.py); off: those warnings go to the
    #   run's log and its report
    gpu_pool: bool = False                        # SFT, tags, RL, evals as deployment runs (klear-gpu pool)
    #   that show as child runs of the pipeline run; False: all in the pipeline's own process (the demo)
    gpu_deployments: dict[str, str] = field(default_factory=lambda: dict(GPU_DEPLOYMENTS))  # with gpu_pool:
    #   stage → FLOW/DEPLOYMENT it runs as (sft, tag-difficulty, rl, evaluate)

    # the settings `klear pipeline` has a flag for; every other one is reached by a deployment's parameters
    # (or the config a run is given), so its errors name no flag
    FLAGS: ClassVar[dict[str, str]] = {"store": "--store", "seed": "--seed", "demo_scale": "--scale"}
    # the nested configs a partial mapping of which is completed from this config's defaults, not the nested
    # class's own (with_nested_defaults); the deployment form says so in their boxes
    NESTED_DEFAULTS: ClassVar[tuple[str, ...]] = ("sft", "rl")

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        """Validated as a dataclass (a config file, a deployment's parameters) after a partial `sft` or `rl`
        mapping is completed from the pipeline's defaults (with_nested_defaults)."""
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(with_nested_defaults, handler(source))

    def __post_init__(self) -> None:
        self._size_for_base()
        try:
            self._check()
        except ConfigError as e:
            raise ConfigError(e.field, e.detail, self.FLAGS.get(e.field, "")) from None

    def _size_for_base(self) -> None:
        """With a `base_model`, SFT and RL at the tiny demo's sizing (left unset) become the pretrained sizing;
        an `sft` or `rl` given with any setting of its own is kept as given."""
        if not self.base_model:
            return
        if self.sft == _demo_sft():
            self.sft = pretrained_sft()
        if self.rl in (demo_rl(), demo_rl(self.demo_scale)):
            self.rl = pretrained_rl()

    def _check(self) -> None:
        """Ranges, names and files, checked when the config is made (the CLI and a deployment run alike):
        the demo's size, known model preset, source and benchmark files that exist (local or fsspec;
        `hf:` sources are checked when read), the reported benchmark among the benchmarks, a base model
        directory with a config.json, and `gpu_deployments` naming only known stages, each FLOW/DEPLOYMENT."""
        from tasks.config_checks import check_float, check_int
        from tasks.curation.demo_data import MIN_SCALE
        from tasks.models.presets import PRESETS

        check_float(self, "demo_scale", MIN_SCALE, 100.0)
        check_int(self, "min_tests", 0)
        check_int(self, "seed", 0)
        check_int(self, "sft_nproc", 1)
        check_int(self, "rl_nproc", 1)
        check_int(self, "difficulty_k", 0, high=4096)
        check_int(self, "eval_k", 1, high=4096)
        check_int(self, "eval_max_tokens", 1)
        if self.model_preset not in PRESETS:
            raise ConfigError("model_preset", f"must be one of {', '.join(PRESETS)} (got {self.model_preset!r})")
        if self.demo and (self.sources or self.benchmarks):  # the demo's own data would replace them in silence
            given = " and ".join(n for n in ("sources", "benchmarks") if getattr(self, n))
            raise ConfigError("demo", f"is on: the run would curate the bundled demo data and ignore your {given}; "
                                      "set demo: false to use them")
        if not self.demo:
            self._check_inputs()
        for stage, name in self.gpu_deployments.items():
            if stage not in GPU_DEPLOYMENTS:
                raise ConfigError("gpu_deployments", f"has an unknown stage {stage!r} "
                                                     f"(known: {', '.join(GPU_DEPLOYMENTS)})")
            flow, sep, deployment = str(name).partition("/")
            if not (flow and sep and deployment) or "/" in deployment:
                raise ConfigError("gpu_deployments", f"must name {stage}'s deployment as FLOW/DEPLOYMENT "
                                                     f"(got {name!r})")

    def _check_inputs(self) -> None:
        from storage import paths
        from tasks.models.pretrained import fetchable

        from tasks.curation.config import SourceSpec

        if not self.sources:
            raise ConfigError("sources", "must name at least one NAME: PATH when demo is off")
        for name, value in self.sources.items():
            try:
                SourceSpec(**source_spec(name, value))  # the layout, renames and domain as klear curate checks them
            except ConfigError as e:
                raise ConfigError(f"sources.{name}.{e.field}", e.detail) from None
        for field_name, named in (("sources", self.source_paths()), ("benchmarks", self.benchmarks)):
            for name, path in named.items():
                if not str(path).startswith("hf:") and not paths.exists(str(path)):
                    raise ConfigError(field_name, f"{name}={path}: no such file")
        if self.reported_benchmark not in self.benchmarks:
            got = f"got {self.eval_benchmark!r}" if self.eval_benchmark is not None else \
                "none named: with several, say which one the table reports"
            raise ConfigError("eval_benchmark", f"must be one of the benchmarks ({', '.join(self.benchmarks) or 'none'})"
                                                f" ({got})")
        self._check_benchmark_rows()
        if self.base_model and not paths.exists(f"{self.base_model}/config.json") and not fetchable(self.base_model):
            raise ConfigError("base_model", f"{self.base_model}: not a model directory (no config.json), nor a "
                                            "pretrained model's name or a Hub id (owner/name)")

    def _check_benchmark_rows(self) -> None:
        """The reported benchmark (`eval_benchmark`) read as the evaluation stages will read it
        (tasks/evaluation/evaluate.py load_benchmark: a row that cannot be graded, or no row, is one line
        naming the file and row), so a bad row stops the run here and not at its first evaluation, after
        curation, verification and SFT; the rows read are cached for those stages. The other benchmarks only
        decontaminate (curation reads them leniently: a row needs no answer); a remote or `hf:` benchmark is
        checked when the stage reads it, not downloaded whenever a config is built."""
        from storage import paths
        from tasks.evaluation.evaluate import load_benchmark

        path = str(self.benchmarks[self.reported_benchmark])
        if path.startswith("hf:") or "://" in path and not path.startswith("file://"):
            return
        try:
            load_benchmark(path)
        except ValueError as e:
            raise ConfigError("benchmarks", f"{self.reported_benchmark}: {e}") from None

    @property
    def reported_benchmark(self) -> str | None:
        """The benchmark the base/SFT/RL table reports: `eval_benchmark`, else the demo's bench_math, else the
        only one of `benchmarks` (None with several: the config refuses that)."""
        if self.eval_benchmark is not None:
            return self.eval_benchmark
        if self.demo:
            return "bench_math"
        return next(iter(self.benchmarks)) if len(self.benchmarks) == 1 else None

    def source_specs(self) -> list[dict]:
        """The sources as the curate flow takes them (SourceSpec fields), in the order given."""
        return [source_spec(name, value) for name, value in self.sources.items()]

    def source_paths(self) -> dict[str, str]:
        """NAME → PATH of every source."""
        return {spec["name"]: spec["path"] for spec in self.source_specs()}

    def scale_note(self) -> str | None:
        """A warning for a demo too small to learn (tasks/curation/demo_data.LEARNING_SCALE), else None."""
        from tasks.curation.demo_data import LEARNING_SCALE

        if not self.demo or self.demo_scale >= LEARNING_SCALE:
            return None
        return (f"demo scale {self.demo_scale:g} checks every stage; the tiny model learns from demo scale "
                f"{LEARNING_SCALE:g} (below, SFT solves too few problems for RL to gain)")

    def deployment_for(self, stage: str) -> str:
        """The deployment that runs `stage` on the GPU pool (an override, else prefect.yaml's default)."""
        return self.gpu_deployments.get(stage) or GPU_DEPLOYMENTS[stage]

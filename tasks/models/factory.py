"""`klear model init`: a Qwen2/Qwen3-architecture causal LM with random weights plus its tokenizer (trained
on the corpus, or Qwen's: tasks/models/presets.py), saved with `save_pretrained` so transformers and vLLM
load the directory as any HF model. (Checks of an existing model directory: tasks/models/checks.py.)

Rules every preset follows:
- embedding rows: the trained tokenizer's size; with Qwen's tokenizer the preset's `vocab_size` (Qwen3's
  padded 151,936), never fewer than the tokenizer's ids;
- end of sequence: generation_config and config list both <|im_end|> (the end of an assistant turn) and
  <|endoftext|>, as Qwen3 does; every backend stops at either (tasks/generation/base.py `stop_ids`);
- pad token <|endoftext|> (the tokenizer's); no bos token.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Iterable

import torch
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

from tasks.config_checks import check_seed
from tasks.models.checks import ModelDirError, check_model_dir, context_length, existing_model  # noqa: F401
from tasks.models.presets import PRESETS
from tasks.models.tokenizer import EOS, IM_END, train_tokenizer

MODEL_CARD = "klear_model.json"
ARCHITECTURES = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}


def init_model(out: Path, texts: Iterable[str], preset: str = "tiny", seed: int = 0) -> Path:
    """Write a new random-init model into `out`. Weight files and a lineage file already there are removed
    first: a stale shard would change the checkpoint id and a stale lineage would name other weights.
    Callers decide whether `out` may be overwritten (the CLI refuses a model it did not make: --force)."""
    from storage.checkpoints import LINEAGE_FILE

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
    check_seed(SimpleNamespace(seed=seed))  # before `out` is made: torch.manual_seed takes 64 bits
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    p = PRESETS[preset]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if p.vocabulary == "qwen":
        from tasks.models.qwen_tokenizer import qwen_tokenizer

        tok = qwen_tokenizer()
        rows = max(p.vocab_size, len(tok))
    else:
        tok = train_tokenizer(texts, p.vocab_size)
        rows = len(tok)
    torch.manual_seed(seed)
    eos_ids = [tok.convert_tokens_to_ids(IM_END), tok.convert_tokens_to_ids(EOS)]
    config_cls, model_cls = ARCHITECTURES[p.architecture]
    extra = {"head_dim": p.hidden_size // p.num_attention_heads} if p.architecture == "qwen3" else {}
    config = config_cls(
        **{k: v for k, v in p.to_dict().items() if k != "vocab_size"}, **extra, vocab_size=rows,
        bos_token_id=None, eos_token_id=eos_ids, pad_token_id=tok.pad_token_id, use_cache=True,
        dtype="float32")
    model = model_cls(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_ids, pad_token_id=tok.pad_token_id,
                                               do_sample=True, temperature=0.6, top_p=0.95)
    for stale in [*out.glob("*.safetensors"), *out.glob("*.bin"), *out.glob("*.index.json"), out / LINEAGE_FILE]:
        stale.unlink(missing_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    (out / MODEL_CARD).write_text(json.dumps({
        "preset": preset, "seed": seed, "parameters": sum(x.numel() for x in model.parameters()),
        "architecture": model_cls.__name__, "vocab_size": rows, "tokenizer_size": len(tok)}, indent=2))
    return out

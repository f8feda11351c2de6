"""Is a directory a loadable model? What every command that loads one (--model of sft, rl, eval,
tag-difficulty, ablate) checks first, so a broken model directory is one line naming the file rather than
a traceback from inside transformers or safetensors. Light: json, struct and zipfile only (the CLI runs
it before importing torch or transformers); `deep=True` also loads config and tokenizer with transformers,
as the trainers do at their entry.

Rules (`check_model_dir`):
- the path is a directory with config.json: a JSON object with a string `model_type`;
- weights (`check_weights`): *.safetensors whose header parses and whose size is what the header says
  (a truncated copy or a garbage file fails here; only the header is read, whatever the model size),
  every shard a `*.index.json` lists present, or *.bin files that are torch (zip) archives;
- tokenizer.json, when present, is JSON the `tokenizers` library loads; tokenizer_config.json is JSON;
- deep: transformers' AutoConfig and AutoTokenizer load the directory (an unknown `model_type`, a field of
  the wrong type).
"""
from __future__ import annotations

import json
import struct
import threading
import zipfile
from pathlib import Path

from tasks.config_checks import error_line

MAX_SAFETENSORS_HEADER = 100 * 2**20  # bytes; the safetensors format's own limit


class ModelDirError(ValueError):
    """A model directory that cannot be loaded; the message names the file and what is wrong."""


def existing_model(out: Path) -> str | None:
    """What in `out` is a model or a run's output (`model init` would overwrite it), or None."""
    out = Path(out)
    if not out.is_dir():
        return None
    for name in ("config.json", "checkpoints", "metrics.jsonl"):
        if (out / name).exists():
            return str(out / name)
    weights = sorted(out.glob("*.safetensors")) + sorted(out.glob("*.bin"))
    return str(weights[0]) if weights else None


def check_model_dir(path: str | Path, deep: bool = False) -> None:
    """ModelDirError (one line naming the file) unless `path` loads as a model (module rules)."""
    p = Path(path)
    if not p.exists():
        raise ModelDirError(f"{path}: no such directory")
    if not p.is_dir():
        raise ModelDirError(f"{path}: is a file, not a model directory")
    _check_config(p, deep)
    check_weights(p)
    _check_tokenizer(p, deep)


def _check_config(p: Path, deep: bool) -> None:
    cfg = p / "config.json"
    if not cfg.is_file():
        raise ModelDirError(f"{p}: not a Hugging Face model directory (no config.json)")
    try:
        value = json.loads(cfg.read_text())
    except (UnicodeDecodeError, ValueError) as e:
        raise ModelDirError(f"{cfg}: not valid JSON ({str(e).splitlines()[0][:120]})") from None
    if not isinstance(value, dict):
        raise ModelDirError(f"{cfg}: not a JSON object")
    if not isinstance(value.get("model_type"), str) or not value["model_type"]:
        raise ModelDirError(f"{cfg}: no 'model_type' (not a Hugging Face model config)")
    if not deep:
        return
    import_model_classes(value["model_type"])
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(str(p))
    except Exception as e:  # unknown model_type, a field of the wrong type, ...: transformers' many types
        raise ModelDirError(f"{cfg}: not a usable model config ({error_line(e)})") from None


_IMPORT_LOCK = threading.Lock()


def import_model_classes(model_type: str) -> None:
    """Import transformers' Auto classes and the config and causal-LM classes of `model_type`, one thread at
    a time. transformers' lazy module can fail (`Could not import module 'LlamaConfig'`, `cannot import name
    'AutoConfig'`) when two threads import through it at the same moment (a stage's engine and its progress or Prefect threads); every model load goes through
    the deep check, which calls this first. An unknown model type is left to AutoConfig's own error."""
    with _IMPORT_LOCK:
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: F401 (imported: ready)
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        for names in (CONFIG_MAPPING_NAMES, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
            found = names.get(model_type, ())
            for cls in found if isinstance(found, tuple) else (found,):
                getattr(transformers, cls)


def check_weights(p: Path) -> None:
    """Weights of a model directory: see the module docstring."""
    p = Path(p)
    shards = sorted(p.glob("*.safetensors"))
    bins = sorted(p.glob("*.bin"))
    if not shards and not bins:
        raise ModelDirError(f"{p}: no model weights (no *.safetensors or *.bin file)")
    for index in p.glob("*.index.json"):
        try:
            listed = set(json.loads(index.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise ModelDirError(f"{index}: not a readable weight index") from None
        missing = sorted(f for f in listed if not (p / f).is_file())
        if missing:
            raise ModelDirError(f"{index}: lists {missing[0]}, which is missing")
    for f in shards:
        why = _safetensors_problem(f)
        if why:
            raise ModelDirError(f"{f}: {why}")
    for f in bins:
        if not zipfile.is_zipfile(f):
            raise ModelDirError(f"{f}: not a readable torch weights file (truncated or corrupt)")


def _safetensors_problem(f: Path) -> str | None:
    size = f.stat().st_size
    with f.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return f"truncated or not a safetensors file ({size} bytes)"
        (n,) = struct.unpack("<Q", head)
        if n > min(MAX_SAFETENSORS_HEADER, size - 8):
            return "truncated or not a safetensors file (bad header length)"
        try:
            header = json.loads(fh.read(n))
            ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
        except (UnicodeDecodeError, ValueError, TypeError, KeyError, IndexError, AttributeError):
            return "truncated or not a safetensors file (unreadable header)"
    expected = 8 + n + max(ends, default=0)
    if size != expected:
        return f"truncated or corrupt ({size:,} bytes; its header says {expected:,})"
    return None


def _check_tokenizer(p: Path, deep: bool) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        f = p / name
        if f.exists():
            try:
                json.loads(f.read_text())
            except (OSError, UnicodeDecodeError, ValueError) as e:
                raise ModelDirError(f"{f}: the tokenizer cannot be loaded (not valid JSON: "
                                    f"{str(e).splitlines()[0][:120]})") from None
    if (p / "tokenizer.json").exists():
        from tokenizers import Tokenizer

        try:
            Tokenizer.from_file(str(p / "tokenizer.json"))
        except Exception as e:  # the Rust side's own exception types
            raise ModelDirError(f"{p / 'tokenizer.json'}: the tokenizer cannot be loaded ({error_line(e)})") from None
    if not deep:
        return
    from transformers import AutoTokenizer

    try:
        AutoTokenizer.from_pretrained(str(p))
    except Exception as e:  # a garbled tokenizer.json raises from the Rust side with its own types
        where = p / "tokenizer.json" if (p / "tokenizer.json").exists() else p
        raise ModelDirError(f"{where}: the tokenizer cannot be loaded ({error_line(e)})") from None


def context_length(model_dir: str | Path) -> int | None:
    """Tokens of prompt + completion the model takes (config.json's max_position_embeddings), or None."""
    try:
        n = json.loads((Path(model_dir) / "config.json").read_text()).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

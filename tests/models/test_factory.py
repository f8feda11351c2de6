import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tasks.models.factory import MODEL_CARD, init_model

CORPUS = [f"<think>\n{a} + {b} = {a + b}\n</think>\nThe answer is \\boxed{{{a + b}}}." for a in range(40) for b in range(40)]


def test_init_saves_a_loadable_hf_model(tmp_path):
    out = init_model(tmp_path / "m", CORPUS, preset="tiny", seed=1)
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.hidden_size // model.config.num_attention_heads >= 32
    card = json.loads((out / MODEL_CARD).read_text())
    assert card["parameters"] == sum(p.numel() for p in model.parameters())
    text = tok.apply_chat_template([{"role": "user", "content": "1+2?"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\n1+2?<|im_end|>\n<|im_start|>assistant\n"
    ids = tok("<think>123</think>")["input_ids"]
    assert tok.convert_ids_to_tokens(ids)[:4] == ["<think>", "1", "2", "3"]  # special marker, digits split
    assert tok.decode(ids) == "<think>123</think>"
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), len(tok))


def test_same_seed_same_weights(tmp_path):
    a = AutoModelForCausalLM.from_pretrained(init_model(tmp_path / "a", CORPUS, seed=3))
    b = AutoModelForCausalLM.from_pretrained(init_model(tmp_path / "b", CORPUS, seed=3))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize("seed, says", [(-1, "must be at least 0"), (1 << 64, f"must be at most {(1 << 63) - 1}")])
def test_a_seed_torch_cannot_take_is_refused_before_anything_is_written(tmp_path, seed, says):
    from tasks.config_checks import ConfigError

    with pytest.raises(ConfigError, match=says):
        init_model(tmp_path / "m", CORPUS, seed=seed)
    assert not (tmp_path / "m").exists()

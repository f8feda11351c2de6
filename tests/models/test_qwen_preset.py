"""`klear model init --preset qwen3-tiny`: a Qwen3 model over Qwen's vocabulary that transformers loads as
saved, with Qwen3's padded embedding rows (tied), both eos ids, the pad token, right padding; and SFT examples
made with its tokenizer end at <|im_end|>, trained on like the response."""
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tasks.models.factory import MODEL_CARD, init_model

IM_END, ENDOFTEXT = 151645, 151643


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    return init_model(tmp_path_factory.mktemp("qwen3-tiny") / "m", [], preset="qwen3-tiny", seed=0)


def test_the_preset_saves_a_qwen3_model_with_qwen_ids(qwen_dir):
    model = AutoModelForCausalLM.from_pretrained(qwen_dir)
    tok = AutoTokenizer.from_pretrained(qwen_dir)
    cfg = model.config
    assert type(model).__name__ == "Qwen3ForCausalLM" and cfg.vocab_size == 151936 and len(tok) == 151669
    assert cfg.tie_word_embeddings and model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert cfg.head_dim == 32  # vLLM's CPU attention needs ≥ 32
    assert model.generation_config.eos_token_id == [IM_END, ENDOFTEXT] and cfg.eos_token_id == [IM_END, ENDOFTEXT]
    assert model.generation_config.pad_token_id == ENDOFTEXT == tok.pad_token_id
    assert tok.eos_token_id == IM_END and tok.padding_side == "right"
    card = json.loads((qwen_dir / MODEL_CARD).read_text())
    assert card["architecture"] == "Qwen3ForCausalLM" and card["vocab_size"] == 151936
    assert card["parameters"] == sum(p.numel() for p in model.parameters())
    ids = tok(tok.apply_chat_template([{"role": "user", "content": "1+2?"}], tokenize=False,
                                      add_generation_prompt=True), add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        assert model(torch.tensor([ids])).logits.shape == (1, len(ids), 151936)


def test_sft_examples_end_at_im_end_and_train_on_it(qwen_dir):
    from tasks.training.sft_data import IGNORE, tokenize_examples

    tok = AutoTokenizer.from_pretrained(qwen_dir)
    (ex,) = tokenize_examples([{"problem": "1+2?", "response": "<think>\nadd\n</think>\n\n\\boxed{3}"}], tok)
    assert ex.input_ids[-1] == IM_END and ex.labels[-1] == IM_END
    assert ex.input_ids.count(IM_END) == 2  # the user turn's and the response's
    first = ex.labels.index(next(x for x in ex.labels if x != IGNORE))
    assert tok.decode(ex.input_ids[first:]) == "<think>\nadd\n</think>\n\n\\boxed{3}<|im_end|>"

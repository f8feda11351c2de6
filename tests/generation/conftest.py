"""The trained tiny model the decode-loop tests sample from."""
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tasks.generation.base import chat_prompt
from tasks.models.factory import init_model

CORPUS = [f"<think>{a}+{b}={a + b}</think> \\boxed{{{a + b}}}" for a in range(30) for b in range(30)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model given 40 Adam steps on chat-formatted sums: a random one greedily repeats one token, so
    greedy comparisons would be vacuous; this one writes varied tokens and sometimes <|im_end|>."""
    path = init_model(tmp_path_factory.mktemp("lean") / "tiny", CORPUS, seed=0)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    docs = [chat_prompt(tok, f"{a}+{b}?") + f"<think>{a}+{b}={a + b}</think> \\boxed{{{a + b}}}<|im_end|>"
            for a in range(12) for b in range(12)]
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(40):
        pick = torch.randint(0, len(docs), (16,), generator=g).tolist()
        b = tok([docs[i] for i in pick], return_tensors="pt", padding=True, add_special_tokens=False)
        labels = b["input_ids"].masked_fill(b["attention_mask"] == 0, -100)
        model(**b, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    return model.eval(), tok

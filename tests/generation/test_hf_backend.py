import pytest
import torch

from tasks.generation.base import SamplingParams, chat_prompt
from tasks.generation.hf_backend import HFGenerator
from tasks.models.factory import init_model

pytestmark = pytest.mark.slow  # trains or samples a real (tiny) model

CORPUS = [f"<think>{a}+{b}={a + b}</think> \\boxed{{{a + b}}}" for a in range(30) for b in range(30)]


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    path = init_model(tmp_path_factory.mktemp("m") / "tiny", CORPUS, seed=0)
    return HFGenerator.from_pretrained(str(path), device="cpu")


def test_shapes_logprobs_and_finish(gen):
    prompts = [chat_prompt(gen.tok, "1+2?"), chat_prompt(gen.tok, "a longer question 3+4?")]
    out = gen.generate(prompts, SamplingParams(n=3, max_tokens=12, temperature=1.0, top_p=1.0, seed=1))
    assert len(out) == 2 and all(len(c) == 3 for c in out)
    for c in out[0] + out[1]:
        assert len(c.token_ids) == len(c.logprobs) <= 12
        assert all(lp <= 0 for lp in c.logprobs)
        assert c.finish_reason in ("stop", "length")
        if c.finish_reason == "stop":
            assert c.token_ids[-1] in gen.eos_ids


def test_same_seed_same_completions(gen):
    p = [chat_prompt(gen.tok, "5+6?")]
    a = gen.generate(p, SamplingParams(n=4, max_tokens=10, temperature=1.0, seed=7))
    b = gen.generate(p, SamplingParams(n=4, max_tokens=10, temperature=1.0, seed=7))
    c = gen.generate(p, SamplingParams(n=4, max_tokens=10, temperature=1.0, seed=8))
    assert [x.token_ids for x in a[0]] == [x.token_ids for x in b[0]]
    assert [x.token_ids for x in a[0]] != [x.token_ids for x in c[0]]


def test_logprobs_match_a_forward_pass(gen):
    p = chat_prompt(gen.tok, "2+2?")
    comp = gen.generate([p], SamplingParams(n=1, max_tokens=8, temperature=1.0, top_p=1.0, seed=3))[0][0]
    prompt_ids = gen.tok(p, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + comp.token_ids])
    with torch.no_grad():
        logp = torch.log_softmax(gen.model(ids).logits[0, len(prompt_ids) - 1:-1].float(), -1)
    ref = logp.gather(-1, torch.tensor(comp.token_ids).unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(ref, torch.tensor(comp.logprobs), atol=1e-4)


def test_samples_do_not_depend_on_the_torch_thread_count(gen, monkeypatch):
    """The engine's thread count is the machine's or the user's (tasks/cpu_threads.py), so it differs between
    machines and between the test suite's process counts: at these shapes the samples must not move with it."""
    prompts = [chat_prompt(gen.tok, f"{a}+{a + 1}?") for a in range(6)]
    params = SamplingParams(n=4, max_tokens=16, temperature=0.6, top_p=0.95, seed=3)
    runs = {}
    for n in (1, 2):
        monkeypatch.setenv("KLEAR_TORCH_THREADS", str(n))
        engine = HFGenerator(gen.model, gen.tok)
        runs[n] = engine.generate(prompts, params)
        assert torch.get_num_threads() == n
    ids = {n: [[c.token_ids for c in cs] for cs in out] for n, out in runs.items()}
    assert ids[1] == ids[2]

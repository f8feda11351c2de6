"""torch.compile of each decoder block (tasks/training/compile.py): the same loss and gradients as eager for
an SFT step over packed rows (varlen attention kept out of the graph) and an RL update; the state-dict keys
are unchanged, so checkpoints load either way."""
import copy

import pytest
import torch

from tasks.training.compile import compile_blocks, decoder_blocks
from tasks.training.config import RLConfig, SFTConfig
from tasks.training.distributed import DistContext
from tasks.training.sft import train_step
from tasks.training.sft_data import IGNORE, Example, pack_examples

pytestmark = pytest.mark.slow  # compilation takes tens of seconds on CPU

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tiny():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.models.presets import PRESETS
    from tasks.training.packed_attention import attn_implementation

    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"].to_dict())), attn_implementation("varlen")


def _grads(model) -> dict:
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def test_compiled_blocks_give_the_eager_sft_step(tiny):
    model, attn = tiny
    model.config._attn_implementation = attn
    g = torch.Generator().manual_seed(0)
    examples = [Example(ids, [IGNORE] * 3 + ids[3:]) for n in (9, 14, 5, 20, 11, 17)
                for ids in [torch.randint(1, model.config.vocab_size, (n,), generator=g).tolist()]]
    packs, _ = pack_examples(examples, 32, 0, seed=0, epoch=0)
    cfg = SFTConfig(batch_size=len(packs), micro_batch_size=2, seq_len=32, attention="varlen")
    ctx = DistContext(0, 1, CPU)
    eager = copy.deepcopy(model)
    compiled = copy.deepcopy(model)
    assert compile_blocks(compiled) == len(decoder_blocks(compiled)) == model.config.num_hidden_layers
    assert compiled.state_dict().keys() == eager.state_dict().keys()
    ref, _ = train_step(eager, packs, cfg, ctx, False)
    for _ in range(2):  # a second step reuses the graphs (other pack lengths: dynamic shapes)
        compiled.zero_grad()
        got, _ = train_step(compiled, packs, cfg, ctx, False)
    assert got == pytest.approx(ref, rel=1e-5)
    ref_g, got_g = _grads(eager), _grads(compiled)
    assert max((got_g[n] - ref_g[n]).abs().max().item() for n in ref_g) < 1e-5


def test_compiled_blocks_give_the_eager_rl_update(tiny):
    from tasks.training.rl_update import Rollout, update_policy

    model, _ = tiny
    rs = [Rollout(g, "math", [5 + g, 6, 7], list(range(10 + k, 20 + 3 * k)), float(k % 2), k % 2 == 1, False)
          for g in range(3) for k in range(4)]
    out = []
    for compiled in (False, True):
        m = copy.deepcopy(model)
        m.config._attn_implementation = "sdpa"
        if compiled:
            compile_blocks(m)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        values = update_policy(m, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0), rs,
                               RLConfig(backend="hf", mini_batches=2, old_logprobs="recompute"), CPU, 0)
        out.append((values, {n: p.detach().clone() for n, p in m.named_parameters()}))
    (v0, w0), (v1, w1) = out
    assert v1["loss"] == pytest.approx(v0["loss"], rel=1e-5)
    assert max((w1[n] - w0[n]).abs().max().item() for n in w0) < 1e-5


def test_compiled_blocks_compile_once_for_any_number_of_documents(tiny):
    """A micro-batch's documents reach varlen attention as a tensor (packed_attention.span_table), so a
    compiled block meets each new count of documents (and each new row length) with the graphs it has; a
    list would be a guard on its length and a compilation per count."""
    from torch._dynamo.utils import counters

    from tasks.training.packed_attention import attention_inputs

    model, attn = tiny
    compiled = copy.deepcopy(model)
    compiled.config._attn_implementation = attn
    compile_blocks(compiled)
    g = torch.Generator().manual_seed(1)
    graphs = []
    for docs in (2, 3, 5, 4, 7, 6):
        sizes = torch.randint(3, 12, (docs,), generator=g).tolist()
        doc = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])[None]
        batch = {"input_ids": torch.randint(1, model.config.vocab_size, doc.shape, generator=g),
                 "position_ids": torch.cat([torch.arange(n) for n in sizes])[None], "document_ids": doc}
        with torch.no_grad():
            compiled(input_ids=batch["input_ids"], position_ids=batch["position_ids"], **attention_inputs(batch, "varlen"))
        graphs.append(counters["stats"]["unique_graphs"])
    assert graphs[-1] == graphs[0], graphs

"""The RL memory plan at a real vocabulary (Qwen's 151,936 rows): its log-prob chunk term bounds what
linear_logprobs really holds, forward and backward, and a Qwen3 model's parameters (tied embedding,
q/k norms) are counted as transformers builds them.

Memory is counted at the tensor level (a dispatch mode adds each new storage's bytes and subtracts them when
the storage is freed), so the figure is what the code keeps alive on any device, not an allocator's view."""
import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from tasks.training.plan import Hardware, Shape, Workload, plan_rl

VOCAB = 151936


class LiveBytes(TorchDispatchMode):
    """Bytes of tensor storage created inside the mode and still alive; `peak` is the most at once."""

    def __init__(self):
        super().__init__()
        self.now = self.peak = 0
        self.seen: set[int] = set()

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key, size = storage.data_ptr(), storage.nbytes()
                if size and key not in self.seen:
                    self.seen.add(key)
                    self.now += size
                    self.peak = max(self.peak, self.now)
                    weakref.finalize(storage, self._free, key, size)
        return out

    def _free(self, key, size):
        self.now -= size
        self.seen.discard(key)


@pytest.mark.parametrize("rows", [1, 3])
def test_the_log_prob_chunk_term_bounds_what_scoring_holds(rows):
    """The response positions' hidden states (a leaf with a gradient, as the decoder's output under bf16
    autocast) through linear_logprobs at Qwen's vocabulary, forward and backward: what it holds at once is the
    plan's log-prob chunk term, within 25 %. The output embedding's own gradient is the plan's `gradients`
    term, so the weight here takes none."""
    from tasks.training.linear_logprobs import linear_logprobs

    response, hidden = 48, 64
    h = torch.randn(rows * response, hidden, requires_grad=True)
    weight = torch.randn(VOCAB, hidden) * 0.02
    targets = torch.randint(0, VOCAB, (rows * response,))
    with LiveBytes() as live:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lp, _ = linear_logprobs(h, weight, targets)
        lp.sum().backward()
    shape = Shape(hidden=hidden, intermediate=64, layers=1, heads=2, kv_heads=2, head_dim=32, vocab=VOCAB, tied=True)
    seq = 3 + response
    plan = plan_rl(shape, Workload(1, rows, rows * seq, 3, response), Hardware(engine=False))
    planned = dict(plan.lines)["log-prob chunk (fp32)"] * 2**30
    assert live.peak <= planned, (live.peak, planned)  # the plan never undercounts
    assert live.peak >= 0.75 * planned, (live.peak, planned)  # nor counts much that is not there


def test_qwen3_parameters_are_counted_as_transformers_builds_them():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from tasks.models.presets import PRESETS

    p = PRESETS["qwen3-tiny"]
    cfg = {**p.to_dict(), "head_dim": p.hidden_size // p.num_attention_heads, "model_type": "qwen3",
           "num_hidden_layers": 1}
    with torch.device("meta"):
        model = Qwen3ForCausalLM(Qwen3Config(**{k: v for k, v in cfg.items() if k != "model_type"}))
    assert Shape.from_hf_config(cfg).params == sum(x.numel() for x in model.parameters())
    assert Shape.from_hf_config(cfg).params > VOCAB * p.hidden_size  # the embedding, once (tied)

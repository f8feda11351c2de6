"""The lean loop's fixed-shape decode steps (tasks/generation/static_decode.py), the GPU default, run here on
CPU without CUDA graphs: the same completions as the dynamic steps while rows shrink into buckets, no read of
unwritten cache positions, the mode rules; and, on a GPU, graph replay against eager steps."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from tasks.generation.base import SamplingParams, chat_prompt
from tasks.generation.hf_backend import HFGenerator
from tasks.generation.static_decode import StaticSteps, bucket_rows, graph_safe, sdpa_one_query

pytestmark = pytest.mark.slow  # samples a real (tiny) model


def prompts(tok):
    return [chat_prompt(tok, q) for q in ("1+2?", "a much longer question about 13+24, please think?", "7+8?")]


def flat(out):
    return [(c.token_ids, c.finish_reason) for cs in out for c in cs]


def max_logprob_gap(a, b):
    return max(abs(x - y) for ca, cb in zip(a, b) for u, v in zip(ca, cb) for x, y in zip(u.logprobs, v.logprobs))


def test_bucket_rows():
    assert [bucket_rows(n) for n in (1, 7, 8, 9, 64, 65, 100)] == [8, 8, 8, 16, 64, 128, 128]
    assert [bucket_rows(n, min_rows=1) for n in (1, 2, 3, 5)] == [1, 2, 4, 8]


@pytest.mark.parametrize("heads,kv_heads", [(14, 2), (4, 4), (8, 1)])
def test_one_query_attention_equals_repeated_kv_heads(heads, kv_heads):
    """Query heads as query positions of their KV head = attention over keys and values repeated per query
    head (transformers' repeat_kv pairing: head h reads KV head h // (heads / kv_heads)), under a padding
    mask; and its output in transformers' (B, 1, H, D) layout."""
    g = torch.Generator().manual_seed(0)
    b, s, d = 3, 11, 16
    q = torch.randn(b, 1, heads, d, generator=g).transpose(1, 2)  # (B, H, 1, D), strided as transformers has it
    k, v = (torch.randn(b, kv_heads, s, d, generator=g) for _ in range(2))
    mask = torch.rand(b, 1, 1, s, generator=g) < 0.7
    mask[..., 0] = True
    out, _ = sdpa_one_query(None, q, k, v, mask, scaling=0.25)
    rep = heads // kv_heads
    ref = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), attn_mask=mask, scale=0.25)
    assert out.shape == (b, 1, heads, d)
    assert torch.allclose(out, ref.transpose(1, 2), atol=1e-6)
    with pytest.raises(ValueError, match="takes one query position, not 2"):
        sdpa_one_query(None, torch.randn(b, heads, 2, d), k, v, mask)


@pytest.mark.parametrize("temperature,top_p,seeds", [(1.0, 1.0, None), (0.7, 0.9, [11, 22, 33]), (0.0, 1.0, None)])
def test_static_steps_give_the_dynamic_steps_completions(trained, temperature, top_p, seeds):
    """Same tokens and finish reasons; log-probs within float rounding (attention sums over the whole cache,
    masked, and the batch shrinks at other steps). With min_bucket_rows=1 the batch halves as rows end."""
    model, tok = trained
    ps = prompts(tok)
    sp = SamplingParams(n=8, temperature=temperature, top_p=top_p, max_tokens=32, seed=3)
    dynamic = HFGenerator(model, tok, decode="dynamic").generate(ps, sp, seeds=seeds)
    g = HFGenerator(model, tok, decode="static", min_bucket_rows=1, eos_check_every=1)
    static = g.generate(ps, sp, seeds=seeds)
    assert flat(static) == flat(dynamic)
    assert max_logprob_gap(static, dynamic) < 1e-5
    report = g.last_decode
    assert report.steps == "static" and report.graphs_captured == 0  # CPU: eager steps
    if temperature > 0:
        assert {f for _, f in flat(static)} == {"stop", "length"}
        counts = report.row_counts
        assert counts[0] == 24 and len(counts) > 1 and all(b <= a // 2 for a, b in zip(counts, counts[1:]))
        assert all(c & (c - 1) == 0 for c in counts[1:])  # powers of two after the first


def test_unwritten_cache_positions_are_never_read(trained, monkeypatch):
    """The prefill's buffers past the prompt hold whatever memory had (new_empty): NaN there must not reach a
    logit, although the static step's attention spans every position (masked)."""
    model, tok = trained
    ps = prompts(tok)
    sp = SamplingParams(n=4, temperature=1.0, top_p=1.0, max_tokens=16, seed=5)
    clean = HFGenerator(model, tok, decode="static", min_bucket_rows=1).generate(ps, sp)
    init = StaticSteps.__init__

    def poisoned(self, model, kv, valid, pos, prompt_width, **kw):
        for k, v in kv:
            k[:, :, prompt_width:] = float("nan")
            v[:, :, prompt_width:] = float("nan")
        init(self, model, kv, valid, pos, prompt_width, **kw)

    monkeypatch.setattr(StaticSteps, "__init__", poisoned)
    out = HFGenerator(model, tok, decode="static", min_bucket_rows=1).generate(ps, sp)
    assert flat(out) == flat(clean)
    assert all(x == x for cs in out for c in cs for x in c.logprobs)  # no NaN


# Operators a CUDA graph cannot hold: each reads a device value on the host (a sync, refused while
# capturing), sizes its output by the data, or copies fresh host data to the device.
NOT_CAPTURABLE = {"aten._local_scalar_dense.default", "aten.is_nonzero.default", "aten.item.default",
                  "aten.nonzero.default", "aten.masked_select.default", "aten.lift_fresh.default",
                  "aten._unique2.default", "aten.unique_consecutive.default", "aten.repeat_interleave.Tensor"}


class _OpLog(TorchDispatchMode):
    """Every aten operator a forward dispatches, with its non-tensor arguments (tensors as shape and dtype)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        shown = tree_map(lambda x: (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x, (args, kwargs))
        self.ops.append((str(func), repr(shown)))
        return func(*args, **kwargs)


def test_a_decode_step_is_capturable(trained, monkeypatch):
    """What a CUDA graph needs of the step, checked on CPU: a replay re-runs the kernels of its capture with
    the arguments the host gave them then, so every step of a bucket must dispatch the same operators with
    the same shapes and the same host values (a position computed on the host, e.g. from the cache's length,
    would be frozen at capture), and none may read the device from the host or size its output by the data.
    The step at t = 0 and at t = 2 of one bucket are compared operator by operator."""
    model, tok = trained
    logs = []
    run = StaticSteps._run

    def logged(self, b, cache):
        with _OpLog() as log:
            out = run(self, b, cache)
        logs.append((b, log.ops))
        return out

    monkeypatch.setattr(StaticSteps, "_run", logged)
    g = HFGenerator(model, tok, decode="static")
    g.generate(prompts(tok)[:2], SamplingParams(n=4, temperature=1.0, max_tokens=4, seed=1))
    assert [b for b, _ in logs] == [8, 8, 8]
    first, third = logs[0][1], logs[2][1]
    assert len(first) > 50 and {op for op, _ in first} & NOT_CAPTURABLE == set()
    assert first == third


def test_decode_mode_rules(trained, tmp_path):
    model, tok = trained
    with pytest.raises(ValueError, match="decode must be one of auto, dynamic, static, not 'graph'"):
        HFGenerator(model, tok, decode="graph")
    g = HFGenerator(model, tok)  # auto: dynamic steps on CPU (and the CPU engine's numbers unchanged)
    g.generate(prompts(tok)[:1], SamplingParams(n=2, max_tokens=4))
    assert g.last_decode.steps == "dynamic"
    saved = model.config._attn_implementation
    model.config._attn_implementation = "eager"
    try:
        with pytest.raises(ValueError, match="decode='static' needs sdpa attention; this model runs 'eager'"):
            HFGenerator(model, tok, decode="static").generate(prompts(tok)[:1], SamplingParams(n=1, max_tokens=4))
        auto = HFGenerator(model, tok, decode="auto")
        auto.generate(prompts(tok)[:1], SamplingParams(n=1, max_tokens=4))
        assert auto.last_decode.steps == "dynamic"
    finally:
        model.config._attn_implementation = saved


def test_which_models_may_be_captured():
    """A rotary embedding that recomputes its frequencies from the length it sees branches on a tensor's value
    (a host sync): such models decode eagerly; fixed rope types are captured."""
    from transformers import Qwen2Config

    assert graph_safe(Qwen2Config())
    assert graph_safe(Qwen2Config(rope_parameters={"rope_type": "yarn", "factor": 2.0, "rope_theta": 1e4}))
    assert not graph_safe(Qwen2Config(rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}))
    assert not graph_safe(type("C", (), {"rope_parameters": {"full_attention": {"rope_type": "longrope"}}})())


def test_a_failed_capture_turns_graphs_off_for_the_generator(trained, monkeypatch):
    """A failed capture may leave torch's graph pool unreleased: the generator does not try again, and its
    report keeps the reason."""
    model, tok = trained
    init = StaticSteps.__init__

    def failing(self, *a, **kw):
        init(self, *a, **kw)
        self.graph_error = "RuntimeError: operation not permitted when stream is capturing"

    monkeypatch.setattr(StaticSteps, "__init__", failing)
    g = HFGenerator(model, tok, decode="static")
    g.generate(prompts(tok)[:1], SamplingParams(n=2, max_tokens=4))
    assert g.last_decode.graph_error.startswith("RuntimeError: operation not permitted")
    assert g.cuda_graphs is False


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_replay_equals_eager_steps(trained):
    """On a GPU (fp32 model): the captured steps (one graph per bucket) give the eager static steps' tokens and
    log-probs (within 1e-5: a kernel library may pick another algorithm under capture), and the dynamic
    steps' tokens."""
    model, tok = trained
    model = model.to("cuda")
    try:
        ps = prompts(tok)
        sp = SamplingParams(n=8, temperature=1.0, top_p=1.0, max_tokens=32, seed=3)
        graphs = HFGenerator(model, tok, decode="static", min_bucket_rows=1)
        a = graphs.generate(ps, sp)
        assert graphs.last_decode.graph_error is None
        assert graphs.last_decode.graphs_captured == len(graphs.last_decode.row_counts)
        eager = HFGenerator(model, tok, decode="static", cuda_graphs=False, min_bucket_rows=1)
        b = eager.generate(ps, sp)
        assert eager.last_decode.graphs_captured == 0
        assert flat(a) == flat(b) and max_logprob_gap(a, b) < 1e-5
        c = HFGenerator(model, tok, decode="dynamic").generate(ps, sp)
        assert [t for t, _ in flat(c)] == [t for t, _ in flat(a)]
    finally:
        model.to("cpu")

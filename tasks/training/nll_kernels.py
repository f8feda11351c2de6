"""The kernels that take SFT's summed log-likelihood of label tokens from the last hidden states, without the
[N, V] logits ever held whole (one registry: NLL_KERNELS; SFTConfig.logprob_kernel picks one):

    Σ_i log π(y_i) = Σ_i ( z_i[y_i] − logsumexp(z_i) ),    z_i = h_i · Wᵀ   (h: N × d, W: V × d, τ = 1)

- `chunked`: linear_logprobs.py's torch autograd function, any device. Per chunk of LOGPROB_CHUNK positions
  the logits, their logsumexp and log π(y); the backward rebuilds each chunk's logits. Four h·Wᵀ-sized
  matmuls in all, and several passes over each chunk's fp32 [C, V] logits (exp, scale, scatter, cast).
- `liger`: Liger Kernel's fused linear cross-entropy (reduction "sum"). Per chunk the logits (one matmul in
  autocast's dtype), then ONE Triton pass takes their logsumexp and the loss and writes the logits' gradient
  softmax − onehot in place; the gradients of h and W are made in the forward (W's summed in fp32,
  `accum_dtype`), and the backward only scales them by the incoming scalar: three matmuls and one fused pass.
  It holds ∂h and ∂W (N·d + V·d floats) from the forward to the backward, and a chunk's logits in autocast's
  dtype (2·C·V bytes under bf16). Needs liger-kernel (the `gpu` extra) and a CUDA device, Triton's; on CPU only
  under TRITON_INTERPRET=1 (Triton's interpreter: slow, exact, what the CPU tests use).

`auto` is liger on a CUDA device where liger-kernel imports and its kernel passes a probe there (`kernel_probe`:
it runs and gives the chunked kernel's numbers on a small problem), else chunked. Both give the value and gradients
of `cross_entropy(h·Wᵀ, y, reduction="sum")` within float rounding (tests/training/test_nll_kernels.py).
"""
from __future__ import annotations

import functools
import logging
import os
from typing import Callable

import torch

from tasks.config_checks import error_line
from tasks.training import distributed as dist_utils
from tasks.training.linear_logprobs import LOGPROB_CHUNK, linear_logprobs

LIGER_INSTALL = "pip install 'klear-pipeline[gpu]'"
log = logging.getLogger(__name__)


def chunked_summed_logprob(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Σ log π(targets) through linear_logprobs (fp32 scalar with its gradient)."""
    logp, _ = linear_logprobs(hidden, weight, targets, entropy=False)
    return logp.sum()


def liger_chunk_budget(positions: int, vocab: int, hidden: int) -> int:
    """Liger's `chunk_mem_const` c for chunks of at most LOGPROB_CHUNK positions. Liger cuts N positions into
    chunks of next_pow2(⌈N / ⌈V / (c·d)⌉⌉); its default c = 1 bounds a chunk's logits by N·d elements, which at
    Qwen's V = 151,936 and d = 896 is chunks of 128 positions: W is read again for every one of them.
    c = ⌊V / (d · k)⌋ with k = ⌈N / LOGPROB_CHUNK⌉ makes ⌈V / (c·d)⌉ ≥ k, so a chunk holds at most
    next_pow2(⌈N / k⌉) ≤ LOGPROB_CHUNK positions (a power of two): between k and 2k chunks. Past V < d·k
    (about 150,000 positions at Qwen's V and d = 4,096) c is 1, Liger's own bound: chunks of N·d/V positions,
    rounded up to a power of two."""
    k = max(1, -(-positions // LOGPROB_CHUNK))
    return max(1, vocab // (hidden * k))


def liger_summed_logprob(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Σ log π(targets) by Liger's fused linear cross-entropy (module docstring), W's gradient summed in fp32."""
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    nll = liger_fused_linear_cross_entropy(
        hidden, weight, targets, reduction="sum", accum_dtype=torch.float32,
        chunk_mem_const=liger_chunk_budget(hidden.shape[0], weight.shape[0], weight.shape[1]))
    return -nll


NLL_KERNELS: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "chunked": chunked_summed_logprob,
    "liger": liger_summed_logprob,
}


def summed_logprob(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, kernel: str) -> torch.Tensor:
    """Σ log π(targets) of hidden states [N, d] under the output embedding `weight` [V, d] by `kernel` (`auto`
    is resolved for the hidden states' device). A pass with no position (a filler pack under DDP/FSDP) takes
    the chunked kernel, which gives every weight its zero gradient."""
    if hidden.shape[0] == 0:
        kernel = "chunked"
    elif kernel == "auto":
        kernel = resolve_logprob_kernel(kernel, hidden.device)
    return NLL_KERNELS[kernel](hidden, weight, targets)


@functools.cache
def kernel_probe(name: str, device: torch.device) -> str | None:
    """Why kernel `name` fails on `device`, or None: it runs there and gives the chunked kernel's Σ log π and
    gradients on a small problem, within 1e-3 (once per process and device; for Liger a few seconds of Triton
    compiling). `auto` takes Liger only where this passes, so a Triton that cannot build its kernels costs the
    fused kernel, never the run."""
    g = torch.Generator(device="cpu").manual_seed(0)
    h, w = torch.randn(96, 64, generator=g), torch.randn(1000, 64, generator=g) * 0.1
    y = torch.randint(0, 1000, (96,), generator=g)

    def run(kernel: str) -> tuple[torch.Tensor, ...]:
        # fp32 with gradients, whatever the caller's autocast or grad mode (a cached answer must be the kernel's)
        with torch.enable_grad(), torch.autocast(device.type, enabled=False):
            hh, ww = h.to(device).requires_grad_(), w.to(device).requires_grad_()
            value = NLL_KERNELS[kernel](hh, ww, y.to(device))
            value.backward()
        return value.detach().cpu(), hh.grad.cpu(), ww.grad.cpu()

    reference = run("chunked")
    try:
        got = run(name)
    except Exception as e:  # noqa: BLE001 - a Triton that cannot compile or run the kernel, of any kind
        return f"fails on {device} ({error_line(e, 200)})"
    if not all(torch.allclose(a, b, rtol=1e-3, atol=1e-4) for a, b in zip(got, reference)):
        return f"gives other numbers than the chunked kernel on {device}"
    return None


@functools.cache
def liger_import_problem() -> str | None:
    """Why liger-kernel cannot be imported here, or None (asked once per process)."""
    try:
        import liger_kernel.transformers.functional  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any failure to import means the kernel cannot be used
        return f"needs liger-kernel, which does not import here ({error_line(e)}; {LIGER_INSTALL})"
    return None


def liger_problem(device: torch.device) -> str | None:
    """Why Liger's kernel cannot run on `device`, or None: no CUDA device (nor Triton's interpreter), no
    liger-kernel, or its kernel failing the probe there."""
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return (f"needs a CUDA device for its Triton kernels (got {device.type}; on CPU only under "
                f"TRITON_INTERPRET=1, Triton's slow interpreter, for tests)")
    return liger_import_problem() or kernel_probe("liger", device)


def resolve_logprob_kernel(requested: str, device: torch.device) -> str:
    """The kernel of a run (SFTConfig.logprob_kernel): `auto` → liger on a CUDA device where it imports and
    passes its probe, else chunked (saying why once, when liger-kernel is installed but fails); `liger` where it
    cannot run is refused in one line naming the flag."""
    if requested == "auto":
        if device.type != "cuda" or liger_import_problem() is not None:
            return "chunked"
        if why := kernel_probe("liger", device):
            _warn_once(f"logprob_kernel auto: the chunked kernel, as Liger's {why}")
            return "chunked"
        return "liger"
    if requested == "liger" and (why := liger_problem(device)):
        raise ValueError(f"logprob_kernel (--logprob-kernel) liger {why}; use chunked or auto")
    return requested


def agreed_logprob_kernel(requested: str, ctx: dist_utils.DistContext) -> str:
    """The kernel every rank of a run takes: resolve_logprob_kernel on each rank's own device, then liger
    only where every rank's choice was liger (`auto` whose probe failed on one rank's GPU: chunked on all),
    so the ranks' losses round alike and the run records one kernel."""
    kernel = resolve_logprob_kernel(requested, ctx.device)
    if ctx.world_size > 1 and 0 < dist_utils.all_reduce_sum(int(kernel == "liger"), ctx) < ctx.world_size:
        return "chunked"
    return kernel


@functools.cache
def _warn_once(message: str) -> None:
    log.warning(message)

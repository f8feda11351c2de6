"""SFT's output-layer kernels (tasks/training/nll_kernels.py): which one a run takes, the one-line refusals, and
Liger's fused linear cross-entropy against the chunked torch kernel and the full logits — on CPU, under Triton's
interpreter, in a process of its own (tests/training/liger_cpu.py). `make test` puts liger-kernel and Triton in
a folder of the venv of their own (LIGER_DIR below): the venv itself keeps no Triton, which the CPU build of
vLLM must not see."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tasks.training.config import SFTConfig
from tasks.training.nll_kernels import LIGER_INSTALL, liger_chunk_budget, liger_import_problem, resolve_logprob_kernel
from tasks.training.scoring import ScoringBatch, score_inputs

HERE = Path(__file__).parent
LIGER_DIR = Path(sys.prefix) / "liger-cpu"  # pip install --no-deps --target .venv/liger-cpu liger-kernel triton


def test_auto_takes_the_chunked_kernel_off_a_gpu():
    assert resolve_logprob_kernel("auto", torch.device("cpu")) == "chunked"
    assert resolve_logprob_kernel("chunked", torch.device("cpu")) == "chunked"


@pytest.mark.slow  # two gloo ranks under torchrun (~10 s)
def test_ranks_whose_own_choices_differ_agree_on_the_chunked_kernel(tmp_path):
    """Liger where every rank chose it, chunked on every rank where one did not (auto whose probe failed on
    one rank's GPU): agreed_logprob_kernel over 2 gloo ranks."""
    cases = ["liger:chunked", "chunked:liger", "liger:liger", "chunked:chunked"]
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        str(HERE / "kernel_ranks.py"), str(tmp_path), *cases],
                       cwd=HERE.parents[1], timeout=300, capture_output=True, text=True)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-3000:]}"
    for rank in (0, 1):
        assert (tmp_path / f"rank-{rank}.txt").read_text().split() == ["chunked", "chunked", "liger", "chunked"]


def test_liger_off_a_gpu_is_refused_in_one_line_naming_the_flag(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError) as e:
        resolve_logprob_kernel("liger", torch.device("cpu"))
    assert "--logprob-kernel" in str(e.value) and "CUDA" in str(e.value) and "\n" not in str(e.value)


def test_liger_that_does_not_import_is_refused_naming_the_extra(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # past the device check
    monkeypatch.setitem(sys.modules, "liger_kernel", None)  # `import liger_kernel…` raises ImportError
    liger_import_problem.cache_clear()
    try:
        with pytest.raises(ValueError) as e:
            resolve_logprob_kernel("liger", torch.device("cpu"))
    finally:
        liger_import_problem.cache_clear()
    assert LIGER_INSTALL in str(e.value) and "\n" not in str(e.value)


def test_an_unknown_kernel_is_refused_by_the_config():
    with pytest.raises(ValueError, match="logprob_kernel"):
        SFTConfig(logprob_kernel="fused")


def test_a_summed_call_is_taken_at_temperature_one_only():
    batch = ScoringBatch({}, torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long), [1])
    with pytest.raises(ValueError, match="temperature 1"):
        score_inputs(batch, 0.7, entropy=False, summed_with="chunked")


@pytest.mark.parametrize("positions, hidden, chunks", [(16384, 896, 4), (10000, 896, 3), (4096, 896, 2),
                                                     (70, 896, 2), (1, 896, 1), (36864, 4096, 9), (131072, 896, 32)])
def test_ligers_chunks_are_at_most_the_chunked_kernels(positions, hidden, chunks):
    """Liger's own rule cuts N positions into chunks of next_pow2(⌈N / ⌈V / (c·d)⌉⌉) (its chunk_mem_const c); at
    Qwen's V the budget keeps every chunk within the chunked kernel's 4,096 positions, in k to 2k chunks."""
    vocab = 151936
    c = liger_chunk_budget(positions, vocab, hidden)
    per = -(-vocab // (c * hidden))
    size = min(positions, 1 << (-(-positions // per) - 1).bit_length())
    assert size <= 4096 and -(-positions // size) == chunks


def _registry_with(monkeypatch, kernel):
    from tasks.training import nll_kernels

    monkeypatch.setitem(nll_kernels.NLL_KERNELS, "suspect", kernel)
    nll_kernels.kernel_probe.cache_clear()
    return nll_kernels


def test_the_probe_passes_a_kernel_that_gives_the_chunked_numbers(monkeypatch):
    def own_form(h, w, y):
        return torch.log_softmax(h @ w.t(), -1).gather(-1, y[:, None]).sum()

    assert _registry_with(monkeypatch, own_form).kernel_probe("suspect", torch.device("cpu")) is None
    nll_kernels = _registry_with(monkeypatch, own_form)  # asked inside a no-grad bf16 context: the same answer
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert nll_kernels.kernel_probe("suspect", torch.device("cpu")) is None


def test_the_probe_fails_a_kernel_that_raises_or_gives_other_numbers(monkeypatch):
    """What `auto` meets when a GPU's Triton cannot build Liger's kernels, or builds them wrong: the run takes
    the chunked kernel and says why."""
    def broken(h, w, y):
        raise RuntimeError("PassManager::run failed\nmore lines")

    why = _registry_with(monkeypatch, broken).kernel_probe("suspect", torch.device("cpu"))
    assert why.startswith("fails on cpu (RuntimeError: PassManager::run failed)") and "\n" not in why

    def off_by_half(h, w, y):
        return 0.5 * torch.log_softmax(h @ w.t(), -1).gather(-1, y[:, None]).sum()

    assert "other numbers" in _registry_with(monkeypatch, off_by_half).kernel_probe("suspect", torch.device("cpu"))


@pytest.mark.slow
def test_liger_trains_as_the_chunked_kernel_under_tritons_interpreter(tmp_path):
    """Value and gradients of Σ log π(y) (several chunks, a scale ≠ 1 on the way back), through the tiny model's
    packed SFT loss, and four SFT steps: Liger's kernel gives the chunked kernel's numbers — to float rounding
    in fp32, to bf16's where the logits are bf16 (its logits' gradient is rounded to bf16 before the incoming
    scale is applied; the chunked kernel's after). An empty pass keeps W's zero gradient."""
    if not (LIGER_DIR / "liger_kernel").is_dir() and liger_import_problem() is not None:
        pytest.skip(f"no liger-kernel here nor in {LIGER_DIR} (make test installs it there)")
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(LIGER_DIR), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, str(HERE / "liger_cpu.py"), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "skipped" not in r, r
    for kernel in ("chunked", "liger"):
        assert max(r["raw_fp32"][kernel][k] for k in ("value", "grad_h", "grad_w")) < 1e-5, r["raw_fp32"]
        assert r["raw_bf16"][kernel]["value"] < 1e-6, r["raw_bf16"]
        assert max(r["raw_bf16"][kernel][k] for k in ("grad_h", "grad_w")) < 2e-2, r["raw_bf16"]
        assert r["raw_fp32"][kernel]["grad_w_dtype"] == "torch.float32"
    assert r["filler"] == {"value": 0.0, "grad_w_zero": True}
    assert r["model_fp32"]["value"] < 1e-6 and r["model_fp32"]["grads"] < 1e-5, r["model_fp32"]
    assert r["model_bf16"]["value"] < 1e-5 and r["model_bf16"]["grads"] < 2e-2, r["model_bf16"]
    assert r["probe"] is None  # `liger` on CPU under the interpreter passes the probe first
    runs = r["training"]
    assert runs["liger"]["recorded"] == "liger" and runs["chunked"]["recorded"] == "chunked"
    assert runs["liger"]["liger_calls"] > 0 and runs["chunked"]["liger_calls"] == 0
    assert runs["liger"]["losses"] == pytest.approx(runs["chunked"]["losses"], rel=1e-4)
    assert runs["liger"]["losses"][-1] < runs["liger"]["losses"][0]


def test_auto_is_resolved_where_the_sum_is_taken():
    """A caller of sft.train_step with the config's `auto` (benches, the compile test) gets the device's kernel."""
    from tasks.training.nll_kernels import summed_logprob

    g = torch.Generator().manual_seed(0)
    h, w, y = torch.randn(9, 8, generator=g), torch.randn(50, 8, generator=g), torch.randint(0, 50, (9,), generator=g)
    ref = torch.log_softmax(h @ w.t(), -1).gather(-1, y[:, None]).sum()
    assert summed_logprob(h, w, y, "auto").item() == pytest.approx(ref.item(), rel=1e-6)

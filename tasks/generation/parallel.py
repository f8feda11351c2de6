"""`--nproc N` for evaluation and difficulty tags: the prompts split over N worker processes, each with its
own engine, merged back in order — the same completions as one engine given the same per-prompt seeds.

    gen = ShardedGenerator(model_dir, backend="hf", nproc=4)
    gen.generate(prompts, params, on_batch=..., seeds=[...])   # == one engine's generate(prompts, params, seeds=...)

Rules:
- Seeds. A prompt's samples must not depend on which worker draws them, so every prompt has its own seed
  (tasks/generation/base.py "Seeding"): the caller's `seeds` (the stages use sampling.problem_seed), or
  without them one per prompt drawn from torch.Generator(params.seed) (the vLLM backend's rule).
- Split (`shard_ranges`): contiguous ranges of the prompts, cut only at multiples of `block`, as even as
  whole blocks allow (the first shards get one block more), no empty shard, so fewer than N workers when
  there are fewer than N blocks. For the transformers backend block = hf_backend.prompts_per_batch
  (batch_size, n): every batch a worker decodes is a batch the one-process call decodes too — same
  prompts, padding and rows — so even float rounding is the same and the completions are bit-identical
  (per-prompt noise alone would leave the ~5e-6 rounding differences of other batch compositions to
  chance: hf_backend "Seeding"). vLLM schedules its own batches whatever the split: block 1.
- Merge. Completions are returned in the prompts' order, and `on_batch(start, completions)` runs in the
  calling process as each worker's batch arrives (start = index in the full prompt list; arrival order),
  so a stage grades and reports while the rest generates, exactly as with one engine.
- Processes. The `multiprocessing` spawn context: a fresh interpreter per worker (nothing forked: no
  CUDA context, thread pool or lock copied mid-use; vLLM may start its own processes from it). One
  Process per shard, results through one Queue. A worker sets its environment (below) before anything
  touches a device (so this module imports torch only inside functions), checks the model, builds its
  engine (engine.open_engine), generates its shard, closes the engine and exits. An exception in a
  worker is raised again in the caller (its own type when it pickles, with the worker's traceback in the
  message otherwise); a worker that dies without a word (killed, out of memory) is a RuntimeError naming
  its exit code; on any failure the other workers are terminated.
  Completions cross the process boundary without logprobs (stages that split only grade texts).
- Devices (`worker_envs`). GPUs visible: worker r sees only the r-th (CUDA_VISIBLE_DEVICES), so N must be
  at most the number of visible GPUs (ValueError otherwise). CPU: worker r runs torch (and OpenMP) with
  max(1, cores // N) threads (cores: tasks/cpu_threads.usable_cpus), so N workers share the cores instead
  of each taking all of them.
A generator here holds no engine between calls: `close()` has nothing to release.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue
import traceback
from typing import Callable, Sequence

from tasks.cpu_threads import pinned_threads, usable_cpus
from tasks.generation.base import Completion, SamplingParams, accepts, check_seeds
from tasks.generation.engine import BACKENDS, open_engine
from tasks.models.checks import check_model_dir, context_length
from tasks.process_lifetime import exit_with_parent

POLL_S = 1.0   # how often the caller looks at its workers while none reports (a dead one is noticed then)


def shard_ranges(n_items: int, nproc: int, block: int = 1) -> list[range]:
    """Contiguous index ranges covering [0, n_items), one per worker, boundaries at multiples of `block`
    (the last range may end on a partial block), as even as whole blocks allow, no empty range."""
    if nproc < 1 or block < 1:
        raise ValueError(f"nproc and block must be at least 1 (got nproc={nproc}, block={block})")
    blocks = -(-n_items // block)
    shards = min(nproc, blocks)
    out, start = [], 0
    for r in range(shards):
        take = blocks // shards + (r < blocks % shards)
        stop = min(n_items, start + take * block)
        out.append(range(start, stop))
        start = stop
    return out


def worker_envs(nproc: int, gpus: Sequence[str], cores: int, most: int | None = None) -> list[dict[str, str]]:
    """The environment of each of `nproc` workers: one visible GPU each when `gpus` (the visible device
    ids) is not empty, else an equal share of the `cores` as torch/OpenMP threads (module rule), at most
    `most` (the count the user set for one process: KLEAR_TORCH_THREADS, OMP_NUM_THREADS)."""
    if gpus:
        if nproc > len(gpus):
            raise ValueError(f"nproc {nproc} needs one GPU per process, but {len(gpus)} "
                             f"{'is' if len(gpus) == 1 else 'are'} visible")
        return [{"CUDA_VISIBLE_DEVICES": str(g)} for g in list(gpus)[:nproc]]
    threads = str(max(1, min(cores // nproc, most or cores)))  # also as KLEAR_TORCH_THREADS, over the user's
    return [{"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "KLEAR_TORCH_THREADS": threads}
            for _ in range(nproc)]


def nproc_problem(nproc: int) -> str | None:
    """What is wrong with `nproc` worker processes on this machine, in a few words (None: nothing): fewer
    than one, or more than one per visible GPU (`worker_envs`). Checked before any work starts."""
    if nproc < 1:
        return f"must be at least 1 (got {nproc})"
    gpus = visible_gpus() if nproc > 1 else []
    if gpus and nproc > len(gpus):
        return f"{nproc}: one GPU per process, but {len(gpus)} GPU{'' if len(gpus) == 1 else 's'} visible"
    return None


def visible_gpus() -> list[str]:
    """The device ids this process may use: CUDA_VISIBLE_DEVICES when set, else 0 .. device_count − 1."""
    import torch  # late: module docstring "Processes"

    if not torch.cuda.is_available():
        return []
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip():
        return [d.strip() for d in env.split(",") if d.strip()][:torch.cuda.device_count()]
    return [str(i) for i in range(torch.cuda.device_count())]


def _worker(rank: int, env: dict, model_dir: str, backend: str, engine_kw: dict, prompts: list[str],
            seeds: list[int], params: SamplingParams, offset: int, q, parent_pid: int) -> None:
    """One shard: environment first (before torch touches a device), then engine, generate, close. Ends
    by itself if the caller is gone (tasks/process_lifetime.py)."""
    exit_with_parent(parent_pid)
    os.environ.update(env)
    gen = None
    try:
        import torch  # after the environment (module docstring "Processes")

        if "OMP_NUM_THREADS" in env:  # a CPU worker: its share of the cores
            torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
        check_model_dir(model_dir, deep=True)
        gen = open_engine(model_dir, backend, **engine_kw)

        def send(start: int, comps: list[list[Completion]]) -> None:
            slim = [[Completion(c.text, list(c.token_ids), [], c.finish_reason) for c in cs] for cs in comps]
            q.put(("batch", rank, (offset + start, slim)))

        if accepts(gen.generate, "on_batch"):
            gen.generate(prompts, params, on_batch=send, seeds=seeds)
        else:
            send(0, gen.generate(prompts, params, seeds=seeds))
        q.put(("done", rank, None))
    except BaseException as e:  # noqa: BLE001 - everything goes back to the caller, which decides
        q.put(("error", rank, (_picklable(e), f"{type(e).__name__}: {e}", traceback.format_exc())))
    finally:
        if gen is not None:
            gen.close()


def _picklable(e: BaseException) -> BaseException | None:
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001
        return None


class ShardedGenerator:
    """The Generator interface (base.py) over `nproc` worker processes (module rules)."""

    def __init__(self, model_dir: str, backend: str, nproc: int, **engine_kw):
        from transformers import AutoTokenizer  # late: it imports torch (module docstring "Processes")

        if backend not in BACKENDS:
            raise ValueError(f"ShardedGenerator needs a resolved backend (hf or vllm), not {backend!r}")
        self.model_dir, self.backend, self.nproc, self.engine_kw = str(model_dir), backend, nproc, engine_kw
        self.envs = worker_envs(nproc, visible_gpus(), usable_cpus(), pinned_threads())
        self.tok = AutoTokenizer.from_pretrained(self.model_dir)
        self.context_length = engine_kw.get("max_model_len") or context_length(self.model_dir)

    def block(self, n: int) -> int:
        """Prompts per indivisible piece of the split (module rule "Split")."""
        if self.backend != "hf":
            return 1
        from tasks.generation.hf_backend import BATCH_SIZE, prompts_per_batch  # late: imports torch

        return prompts_per_batch(self.engine_kw.get("batch_size", BATCH_SIZE), n)

    def generate(self, prompts: Sequence[str], params: SamplingParams,
                 on_batch: Callable[[int, list[list[Completion]]], None] | None = None,
                 seeds: Sequence[int] | None = None) -> list[list[Completion]]:
        check_seeds(seeds, prompts)
        prompts = list(prompts)
        if seeds is None:
            import torch  # late: module docstring "Processes"

            gen = torch.Generator(device="cpu").manual_seed(params.seed)
            seeds = torch.randint(0, 2**62, (len(prompts),), generator=gen).tolist()
        seeds = [int(s) for s in seeds]
        ranges = shard_ranges(len(prompts), self.nproc, self.block(params.n))
        out: list[list[Completion] | None] = [None] * len(prompts)
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = []
        try:
            for rank, r in enumerate(ranges):
                p = ctx.Process(target=_worker, name=f"klear-generate-{rank}",
                                args=(rank, self.envs[rank], self.model_dir, self.backend, self.engine_kw,
                                      prompts[r.start:r.stop], seeds[r.start:r.stop], params, r.start, q,
                                      os.getpid()))
                p.start()
                procs.append(p)
            done: set[int] = set()
            silent: set[int] = set()  # exited 0 without "done" at the last poll: its messages may be in flight
            while len(done) < len(procs):
                try:
                    kind, rank, payload = q.get(timeout=POLL_S)
                except queue.Empty:
                    for rank, p in enumerate(procs):
                        if rank in done or p.exitcode is None:
                            continue
                        if p.exitcode != 0 or rank in silent:
                            raise RuntimeError(f"generation worker {rank} (prompts {ranges[rank].start}-"
                                               f"{ranges[rank].stop - 1}) exited with code {p.exitcode} "
                                               "without a result")
                        silent.add(rank)
                    continue
                if kind == "batch":
                    start, comps = payload
                    out[start:start + len(comps)] = comps
                    if on_batch is not None:
                        on_batch(start, comps)
                elif kind == "done":
                    done.add(rank)
                else:
                    exc, line, tb = payload
                    if exc is None:
                        raise RuntimeError(f"generation worker {rank}: {line}\n{tb}")
                    exc.add_note(f"(raised in generation worker {rank}:\n{tb})")
                    raise exc
            for p in procs:
                p.join()
        finally:
            for p in procs:
                if p.is_alive():
                    p.terminate()
            for p in procs:
                p.join(timeout=30)
            q.close()
        return out  # type: ignore[return-value]

    def close(self) -> None:
        """Nothing to release: each call's workers build, close and exit with their engines."""

"""verify_rows: judge code submissions in sandboxes, spread over Dask workers (or threads here).

    results = verify_rows(rows, VerifyConfig(workers=2))

Input rows `{id, code, tests, [language], [time_limit]}`; one output row per input, in input order:
`{id, verdict, passed, total, reward, details}` (see sandbox/verdicts.py). A row that is no submission
(tasks/verification/input_rules.py: not an object, no id, code that is not a string, an unknown language,
a bad time_limit) is the caller's fault: BadSubmission naming it, before any container starts, never a
verdict. Rows with missing or malformed tests get `invalid_tests` with the reason; a chunk lost with its
Dask worker is rescheduled by Dask, and one that still fails comes back as sandbox_error rows (a fault
outside the program), so every input row gets exactly one result.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from sandbox.config import JudgeConfig, PoolConfig
from sandbox.image import ensure_image
from sandbox.judge import prepare, verify_safely
from sandbox.pool import SandboxPool
from sandbox.verdicts import INVALID_TESTS, SANDBOX_ERROR, result_row
from tasks.dask_client import DaskError, dask_cluster
from tasks.progress import Progress
from tasks.verification.input_rules import MISSING_TESTS, check_submissions, missing_tests

log = logging.getLogger(__name__)


class VerifyError(RuntimeError):
    """The run cannot start (no scheduler at the address, no Docker engine); the message says why."""


@dataclass(frozen=True)
class VerifyConfig:
    workers: int = 2  # LocalCluster workers (one sandbox container each): one per core
    threads_per_worker: int = 1  # containers per worker: a worker thread waits on its container, not the CPU
    processes: bool = False  # LocalCluster workers as threads of this process, sharing one pool that warms
    #   while Dask starts: the host side of judging is I/O-bound (≈ 0.7 ms CPU per row; programs run in
    #   the containers), while spawning worker processes costs seconds of start-up (≈ 2-4 s here), more
    #   than a few hundred rows take. True: one process (and pool) per worker, so a crash in the
    #   host-side judge costs a worker, not the run (and for very many workers)
    dask_address: str | None = None  # an existing scheduler ("tcp://host:8786"); None starts a LocalCluster
    executor: str = "dask"  # "dask", or "threads": a pool in this process (tests, rewards inside a trainer)
    pool_owner: str | None = None  # threads executor: keep the pool warm across calls under this name
    #   (get_pool/close_pools in tasks.verification.worker; the caller closes it); None: a pool per call
    chunk_size: int = 8  # rows per Dask task: amortises scheduling (≈ 1 ms/task) over several submissions
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)


def _row_id(row):
    return row.get("id") if isinstance(row, dict) else None


def verify_chunk(rows: list[dict], judge: JudgeConfig, pool: PoolConfig, owner: str | None = None) -> list[dict]:
    """The Dask task: judge a few rows on a warm pool (this worker's, or with `owner` the run's pool in
    this process, which the threads of a threads-only LocalCluster share)."""
    from tasks.verification.worker import get_pool  # imports distributed: on a worker it is there already

    sandbox = get_pool(pool, owner=owner)
    return [verify_safely(row, sandbox, judge) for row in rows]


def _lost(rows: list[dict], why: str) -> list[dict]:
    return [result_row(_row_id(r), SANDBOX_ERROR, 0, 0, {"reason": why}) for r in rows]


def _chunks(indices: list[int], size: int) -> list[list[int]]:
    return [indices[i:i + size] for i in range(0, len(indices), size)]


def _run_threads(rows, todo, config, results, tick) -> None:
    """Judge in threads of this process. With `pool_owner` the containers stay warm for the next call
    (a trainer grading every step pays the pool start-up, ≈ 0.3-0.5 s, once); else a pool per call."""
    size = config.workers * config.threads_per_worker
    pool_config = dataclasses.replace(config.pool, size=size)
    if config.pool_owner is None:
        pool = SandboxPool(pool_config)
    else:
        from tasks.verification.worker import get_pool  # imports distributed (≈ 0.5 s): only when asked

        pool = get_pool(pool_config, owner=config.pool_owner)
    with (pool if config.pool_owner is None else nullcontext(pool)), ThreadPoolExecutor(size) as ex:
        futures = {ex.submit(verify_safely, rows[i], pool, config.judge): i for i in todo}
        for fut in futures:
            results[futures[fut]] = fut.result()
            tick(1)


@contextmanager
def _cluster(config: VerifyConfig, warm: bool) -> Iterator[tuple]:
    """(client, cluster or None) of one run, set up and closed by tasks/dask_client.py as curation's part
    runner is: the scheduler at `dask_address`, else a LocalCluster of `workers`. With `warm`, a plugin warms
    each worker's own containers as it starts."""
    from tasks.verification.worker import SandboxPlugin  # imports distributed: only runs that use Dask

    local = not config.dask_address
    with ExitStack() as stack:
        try:
            client, cluster = stack.enter_context(dask_cluster(
                config.dask_address, config.workers, threads_per_worker=config.threads_per_worker,
                processes=config.processes, plugins=[SandboxPlugin(config.pool)] if warm and local else []))
        except DaskError as exc:
            raise VerifyError(str(exc)) from None
        if warm and not local:  # only the workers that will get sandbox tasks warm containers (sandbox_placement)
            resources, _ = sandbox_placement(client.scheduler_info())
            client.register_plugin(SandboxPlugin(config.pool, resource=SANDBOX_RESOURCE if resources else None))
        yield client, cluster


def _check_image(config: VerifyConfig) -> None:
    try:
        ensure_image(config.pool.image)
    except Exception as exc:
        raise VerifyError(f"sandbox image: {exc}") from None


def _warm_run_pool(pool: PoolConfig, owner: str) -> None:
    from tasks.verification.worker import get_pool  # imports distributed (≈ 0.5 s): only when asked

    try:
        get_pool(pool, owner=owner)
    except Exception as exc:
        raise VerifyError(f"sandbox: {exc}") from None


def _in_background(fn, *args):
    ex = ThreadPoolExecutor(1, thread_name_prefix="klear-verify-start")
    future = ex.submit(fn, *args)
    ex.shutdown(wait=False)  # the job still runs; nothing else will be submitted
    return future


SANDBOX_RESOURCE = "sandbox"  # Dask worker resource advertised by workers that can run sandbox containers


def sandbox_placement(scheduler_info: dict) -> tuple[dict | None, int]:
    """Where sandbox tasks may run on an existing cluster: when any worker advertises the `sandbox`
    resource (`dask worker --resources sandbox=1`, as the compose stack's workers do), tasks require one
    unit of it, so they land only on workers with a Docker engine; otherwise any worker may take them.
    Returns (resources for `client.map` or None, number of eligible workers, at least 1)."""
    workers = scheduler_info.get("workers", {}).values()
    able = [w for w in workers if (w.get("resources") or {}).get(SANDBOX_RESOURCE, 0) >= 1]
    if able:
        return {SANDBOX_RESOURCE: 1}, len(able)
    return None, max(1, len(workers))


def _run_dask(rows, todo, config, results, tick) -> None:
    from tasks.verification.worker import close_pools  # imports distributed (≈ 0.5 s): only when asked

    pool, owner, started = config.pool, None, None
    if config.dask_address is None and not config.processes:
        # The workers will be threads of this process: they share one pool for this run, whose
        # containers come up while Dask is imported and started (the image is checked on the way).
        pool = dataclasses.replace(config.pool, size=config.workers * config.threads_per_worker)
        owner = f"verify-{uuid.uuid4().hex[:12]}"
        started = _in_background(_warm_run_pool, pool, owner)
    elif config.dask_address is None:  # worker processes on this host: build the image once, here,
        #   while the cluster starts (a worker that gets there first waits on the build lock)
        started = _in_background(_check_image, config)
    try:
        from distributed import as_completed  # after the pool started warming: they overlap

        with _cluster(config, warm=owner is None) as (client, cluster):
            if started is not None:
                started.result()  # no image, no engine: VerifyError (and the cluster closes on the way out)
            resources, workers = (None, config.workers) if cluster else sandbox_placement(client.scheduler_info())
            per_task = max(1, min(config.chunk_size, math.ceil(len(todo) / (4 * workers))))
            chunks = _chunks(todo, per_task)
            futures = client.map(verify_chunk, [[rows[i] for i in c] for c in chunks], judge=config.judge,
                                 pool=pool, owner=owner, pure=False, retries=1, resources=resources)
            which = {f.key: c for f, c in zip(futures, chunks)}
            for fut in as_completed(futures):
                chunk = which[fut.key]
                try:
                    out = fut.result()
                except Exception as exc:  # the task failed on every try (e.g. its workers kept dying)
                    out = _lost([rows[i] for i in chunk], f"task failed: {type(exc).__name__}: {exc}")
                for i, res in zip(chunk, out):
                    results[i] = res
                tick(len(chunk))
    finally:
        if owner is not None:
            if started is not None:
                try:
                    started.result()  # a pool still starting must not be registered after the close
                except Exception:
                    pass
            close_pools(owner)


def verify_rows(rows: Iterable[dict], config: VerifyConfig = VerifyConfig(),
                progress: Progress | None = None) -> list[dict]:
    """Judge every row; results in input order, exactly one per row. `progress` (tasks/progress.py) gets
    the rows done of all, and the rows each update adds as its work (a rows/s rate). BadSubmission (a
    ValueError naming the row) for a row that is no submission (module docstring), before any work."""
    if config.executor not in ("dask", "threads"):
        raise ValueError(f"executor must be 'dask' or 'threads', not {config.executor!r}")
    rows = list(rows)
    check_submissions(rows, config.judge)
    results: list[dict | None] = [None] * len(rows)
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress.update(done, len(rows), tokens=n)

    todo = []
    for i, row in enumerate(rows):  # rows whose tests cannot be judged are settled here, never reach a worker
        if missing_tests(row):
            results[i] = result_row(row["id"], INVALID_TESTS, 0, 0, {"reason": MISSING_TESTS})
            continue
        prepared = prepare(row, config.judge)
        if isinstance(prepared, dict):
            results[i] = prepared
        else:
            todo.append(i)
    tick(len(rows) - len(todo))
    if todo:
        started = time.monotonic()
        if config.executor == "threads":
            _run_threads(rows, todo, config, results, tick)
        else:
            _run_dask(rows, todo, config, results, tick)
        log.info("verified %d rows in %.1fs", len(todo), time.monotonic() - started)
    missing = [i for i, r in enumerate(results) if r is None]
    for i in missing:  # cannot happen; kept so a bug shows as sandbox_error rows, not a short output
        results[i] = result_row(_row_id(rows[i]), SANDBOX_ERROR, 0, 0, {"reason": "no result"})
    return results

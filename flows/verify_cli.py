"""`klear verify` and `klear sandbox ...`: registered onto the main app by flows/cli.py.

    klear verify INPUT --out OUTPUT [--dask ADDRESS] [--workers N] [--processes]
    klear sandbox build [--force] [--cpp]
    klear sandbox reap [--all]

User errors (missing input, a directory given as INPUT, bad extension, --out naming the input, --out a
directory or in a place that cannot be written, bad flag value, no Docker engine, unreachable scheduler,
and a row of INPUT that is no submission: not a JSON object, no id, a duplicate id, code that is not a
string, an unknown language or a bad time_limit, tasks/verification/input_rules.py) are one line on stderr
with exit status 2, never a traceback, and before any container starts. A row whose tests are missing or
malformed is judged: `invalid_tests` with the reason.

--out is never someone else's data: an existing OUTPUT is overwritten only when it is a `klear verify`
result file (its rows carry id/verdict/reward) or with --force (`_check_output`).
"""
from __future__ import annotations

import collections
import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from flows.cli_common import UserError


def docker_client():
    """The Docker engine the sandboxes run in (`klear verify`, `klear curate --verify-code`); one line when
    none answers, before any work."""
    try:
        import docker

        client = docker.from_env(timeout=300)
        client.ping()
        return client
    except Exception as exc:
        raise UserError(f"no Docker engine answers ({type(exc).__name__}); start one, e.g. "
                        "scripts/ensure-docker.sh") from None


def _summary(results: list[dict]) -> str:
    counts = collections.Counter(r["verdict"] for r in results)
    scored = [r["reward"] for r in results if r["reward"] is not None]
    mean = sum(scored) / len(scored) if scored else 0.0
    parts = ", ".join(f"{v} {n}" for v, n in counts.most_common()) or "none"
    return f"{len(results)} rows: {parts}; mean reward {mean:.3f} over {len(scored)} scored"


RESULT_FIELDS = {"id", "verdict", "reward"}


def _is_verify_output(path: Path) -> bool:
    """Whether an existing file is a `klear verify` result: its first row (JSONL) or its columns
    (Parquet) carry id, verdict and reward."""
    try:
        if path.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            return RESULT_FIELDS <= set(pq.read_schema(path).names)
        with path.open("rb") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    return isinstance(row, dict) and RESULT_FIELDS <= set(row)
        return True  # an empty file holds nothing to lose
    except Exception:  # unreadable: not ours to overwrite
        return False


def _check_output(out: str, force: bool) -> None:
    """--out is a file in a writable directory, and not somebody's data (module rule)."""
    from storage import paths
    from storage.claims import ClaimError, could_create_dir

    if not paths.is_local(out):
        return
    target = Path(out.removeprefix("file://"))
    if target.is_dir():
        raise UserError(f"--out {out}: is a directory; give a .jsonl or .parquet file path")
    try:  # creates nothing: a refused command (bad input rows included) leaves no directory behind
        could_create_dir(target.parent)
    except ClaimError as exc:
        raise UserError(f"--out {out}: cannot write there ({exc})") from None
    if target.exists() and not force and not _is_verify_output(target):
        raise UserError(f"--out {out}: exists and is not a klear verify result; pass --force to overwrite it")


def verify(
    input: str = typer.Argument(..., help="Submissions: .jsonl or .parquet rows with id, code and tests "
                                "(optional: language, time_limit)"),
    out: str = typer.Option(..., "--out", help="Results: .jsonl or .parquet rows with id, verdict, passed, total, "
                            "reward and details"),
    dask: Optional[str] = typer.Option(None, "--dask", help="Address of an existing Dask scheduler (default: a LocalCluster)"),
    workers: int = typer.Option(2, "--workers", help="LocalCluster workers, one sandbox container each"),
    processes: bool = typer.Option(False, "--processes", help="LocalCluster workers as processes, not threads "
                                   "of this one (≈ 3 s more start-up; a judge crash then costs one worker)"),
    max_tests: int = typer.Option(16, "--max-tests", help="Tests per submission (sampled, seeded)"),
    seed: int = typer.Option(0, "--seed", help="Test-sampling seed"),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing OUTPUT that is not a klear verify result"),
) -> None:
    """Run code submissions against their tests in Docker sandboxes and write one verdict per row."""
    from sandbox.config import JudgeConfig
    from storage import paths
    from tasks.progress import StepProgress
    from tasks.verification import VerifyConfig, VerifyError, VerifyIOError, read_rows, verify_rows, write_rows
    from tasks.verification.io import output_kind, same_file

    if workers < 1:
        raise UserError(f"--workers {workers}: must be at least 1")
    if max_tests < 1:
        raise UserError(f"--max-tests {max_tests}: must be at least 1")
    try:
        output_kind(out)
    except VerifyIOError as exc:
        raise UserError(f"--out {exc}") from None
    from flows.cli_checks import check_input_file

    check_input_file(input, input)  # a URL nothing here opens, a named pipe: one line
    if why := paths.url_problem(out):
        raise UserError(f"--out {out}: {why}")
    if not input.startswith("hf:") and not paths.exists(input):
        raise UserError(f"{input}: no such file")
    if same_file(input, out):
        raise UserError(f"--out {out}: is the input file; write the results to another path")
    _check_output(out, force)
    config = VerifyConfig(workers=workers, processes=processes, dask_address=dask,
                          judge=JudgeConfig(max_tests=max_tests, seed=seed))
    try:
        rows = read_rows(input, config.judge)
    except VerifyIOError as exc:
        raise UserError(str(exc)) from None
    if dask is None:
        docker_client()
    else:  # before any row is sent: a refused address is one line, not a progress line and then the error
        from flows.cli_checks import check_dask

        check_dask(dask)
    started = time.monotonic()
    with StepProgress("verify", unit="rows", rate_unit="rows/s") as report:  # stderr, as every stage's
        try:
            results = verify_rows(rows, config, progress=report)
        except VerifyError as exc:
            raise UserError(str(exc)) from None
    try:
        if paths.is_local(out):
            Path(out.removeprefix("file://")).parent.mkdir(parents=True, exist_ok=True)
        write_rows(results, out)
    except VerifyIOError as exc:
        raise UserError(str(exc)) from None
    elapsed = time.monotonic() - started
    print(f"{_summary(results)} -> {out} ({elapsed:.1f}s, {len(rows) / max(elapsed, 1e-9):.1f} rows/s)")


def build(
    force: bool = typer.Option(False, "--force", help="Rebuild even if an image with this recipe exists"),
    cpp: bool = typer.Option(False, "--cpp", help="Include g++ for C++ submissions"),
) -> None:
    """Build the sandbox image from Debian packages (debootstrap + docker import; no registry)."""
    from sandbox.image import ImageConfig, build_image

    client = docker_client()
    started = time.monotonic()
    try:
        tag = build_image(force=force, config=ImageConfig(cpp=cpp), client=client)
    except RuntimeError as exc:
        raise UserError(f"sandbox build: {exc}") from None
    print(f"{tag} ({time.monotonic() - started:.1f}s)")


def reap(all_: bool = typer.Option(False, "--all", help="Remove every sandbox container, not just orphans")) -> None:
    """Remove sandbox containers left by crashed clients."""
    from sandbox.reaper import reap as reap_containers

    removed = reap_containers(docker_client(), everything=all_)
    print(f"removed {len(removed)} sandbox container(s)")


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
    sandbox_app = typer.Typer(help="The Docker sandbox used by `klear verify`.", no_args_is_help=True)
    sandbox_app.command("build")(build)
    sandbox_app.command("reap")(reap)
    app.add_typer(sandbox_app, name="sandbox")


if __name__ == "__main__":  # standalone: python -m flows.verify_cli ...
    standalone = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    register(standalone)
    try:
        standalone()
    except UserError as exc:
        exc.show()
        sys.exit(2)

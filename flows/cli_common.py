"""Shared CLI plumbing: user errors are one line on stderr and exit 2, never a traceback."""
from __future__ import annotations

import os
import sys

try:  # typer >= 0.29 vendors its own click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions


class UserError(Exception):
    """A bad invocation or bad input file: printed as one line on stderr, exit code 2."""
    exit_code = 2

    def show(self) -> None:
        print(f"klear: error: {self}", file=sys.stderr)


def parse_pairs(values: list[str] | None, flag: str, sep: str = "=") -> dict[str, str]:
    """`NAME=VALUE` options → dict, in the order given; a malformed or repeated NAME is a UserError."""
    out: dict[str, str] = {}
    for v in values or []:
        name, ok, value = v.partition(sep)
        if not ok or not name.strip() or not value.strip():
            raise UserError(f"{flag} {v!r}: expected NAME{sep}VALUE")
        if name in out:
            raise UserError(f"{flag} {v!r}: {name!r} given twice")
        out[name.strip()] = value.strip()
    return out


def no_prefect_telemetry() -> None:
    """Analytics off, and so no telemetry notice, unless the user turned analytics on. Prefect 3.9 prints
    its first-run notice ("Prefect collects anonymous usage data…") on a terminal when it is imported and
    sends client events unless DO_NOT_TRACK is set; PREFECT_SERVER_ANALYTICS_ENABLED=false only quiets the
    (ephemeral) server. So both are set, before anything imports Prefect."""
    if os.environ.get("PREFECT_SERVER_ANALYTICS_ENABLED", "").strip().lower() not in ("true", "1", "yes"):
        os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def early_defaults() -> None:
    """Set before any command imports Prefect or Hugging Face libraries (which read them at import):
    no telemetry, and off a terminal no tqdm bars (a log gets klear's plain progress lines, no redraws)."""
    no_prefect_telemetry()
    if not _isatty(sys.stderr):
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def quiet_prefect_defaults() -> None:
    """Keep a CLI run's Prefect noise down unless the user configured Prefect themselves."""
    early_defaults()
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("DASK_DISTRIBUTED__LOGGING__DISTRIBUTED", "warning")
    # the ephemeral server needs longer than Prefect's 20 s default on a loaded 2-core machine
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")

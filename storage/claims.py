"""Output directories: writable or a one-line reason, and claimed by one run at a time.

    with claim_dir(out):        # ClaimError if another live run holds `out`
        ...train into runs/a...

Rules (`claim_dir`):
- The claim is the file `<dir>/.klear-claim.json`, created with O_CREAT|O_EXCL (atomic on a local or NFS
  file system) and holding the owner: pid, host, the process's start time, command, since (UTC).
- Held by a live process → ClaimError naming it (pid, host, command, since). Two `klear sft` runs on one
  --out would otherwise interleave metrics lines and overwrite each other's checkpoints.
- Stale → taken over: the owner pid is dead on this host, or that pid now belongs to another process (its
  start time differs: the pid was reused after a reboot or a wrap-around).
- Held from another host → refused: this host cannot tell whether that run still goes; the message says
  which file to remove once it is gone.
- A claim file that cannot be parsed (a writer killed between creating and filling it) is stale once it is
  older than `PARTIAL_GRACE_S`; younger, its writer may be mid-write and it is refused.
- Re-entrant within a process tree: a claim held by this process or one of its ancestors (the CLI that
  launched torchrun ranks, which then claim the directory themselves) is shared, and only the outermost
  holder removes the file.
- Claims of one directory are decided one at a time (flock on the directory), so two runs that find the
  same stale claim cannot both take it over.
- Release removes the file only while it still names this process.

`writable_dir` is the first step of a claim and is used alone for stores: the directory exists or is
created, and a probe file can be created in it; otherwise ClaimError with one line (a file in the way, a
parent that is a file, permission, read-only file system). storage/ imports no Prefect and no torch.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)

CLAIM_FILE = ".klear-claim.json"
PARTIAL_GRACE_S = 30.0


class ClaimError(ValueError):
    """An output directory that cannot be used now; the message names it and why."""


def could_create_dir(path: str | Path) -> None:
    """ClaimError unless `path` is a writable directory or one that could be created (its nearest existing
    ancestor takes a new directory: tried, then removed). Creates nothing: a refused command leaves no trace."""
    p = Path(path).absolute()
    if p.is_dir():
        if not os.access(p, os.W_OK | os.X_OK):
            raise ClaimError(f"{path}: directory is not writable")
        try:  # root passes os.access on a read-only mount or in /proc: a probe directory, made and removed
            os.rmdir(tempfile.mkdtemp(prefix=".klear-probe-", dir=p))
        except OSError as e:
            raise ClaimError(f"{path}: directory is not writable ({e.strerror or type(e).__name__})") from None
        return
    if p.exists():
        raise ClaimError(f"{path}: is a file, not a directory")
    missing = p
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ClaimError(f"{path}: cannot create the directory: a parent is a file")
            try:  # the only sure test (root passes os.access where /proc still refuses): made and removed
                os.mkdir(missing)
                os.rmdir(missing)
            except OSError as e:
                raise ClaimError(f"{path}: cannot create the directory ({e.strerror or type(e).__name__})") from None
            return
        missing = parent


def writable_dir(path: str | Path) -> Path:
    """`path` as an existing, writable directory (created if missing), or ClaimError naming the problem."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ClaimError(f"{path}: is a file, not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a parent (or the path itself) is a file
        raise ClaimError(f"{path}: cannot create the directory: a parent is a file") from None
    except NotADirectoryError:
        raise ClaimError(f"{path}: cannot create the directory: a parent is a file") from None
    except OSError as e:
        raise ClaimError(f"{path}: cannot create the directory ({e.strerror or type(e).__name__})") from None
    try:
        with tempfile.NamedTemporaryFile(dir=p, prefix=".klear-probe-"):
            pass
    except OSError as e:
        raise ClaimError(f"{path}: directory is not writable ({e.strerror or type(e).__name__})") from None
    return p


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux /proc), or None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the command name (field 2) may hold spaces


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _ancestry() -> set[int]:
    """This process and its ancestors (Linux; elsewhere this process and its parent)."""
    pids, pid = {os.getpid()}, os.getppid()
    while pid and pid not in pids:
        pids.add(pid)
        pid = _parent(pid)
    return pids


def _alive(owner: dict) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        pass
    start = process_start(pid)
    return start is None or owner.get("pid_start") in (None, start)


def describe(owner: dict) -> str:
    return (f"pid {owner.get('pid')} on {owner.get('host')} since {owner.get('since')}: "
            f"{owner.get('command') or '?'}")


def _read(path: Path) -> dict | None:
    try:
        owner = json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def _owner(command: str | None) -> dict:
    if command is None:  # what the user typed (`klear sft ...`), else the interpreter's command line
        command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:400] if sys.argv and sys.argv[0] else "python"
    return {"pid": os.getpid(), "host": socket.gethostname(), "pid_start": process_start(os.getpid()),
            "command": command, "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def _try_create(path: Path, owner: dict) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(owner, indent=2))
    return True


def _why_stale(path: Path, owner: dict | None, host: str) -> str | None:
    """Why an existing claim may be taken over, or None if it still holds."""
    if owner is None:
        age = time.time() - path.stat().st_mtime
        return f"an unreadable claim file {age:.0f}s old" if age > PARTIAL_GRACE_S else None
    if owner.get("host") != host:
        return None
    return None if _alive(owner) else f"its owner ({describe(owner)}) is no longer running"


@contextlib.contextmanager
def _serialized(d: Path) -> Iterator[None]:
    """Claims of one directory are decided one at a time on this host (flock on the directory itself),
    so two runs that both find a stale claim cannot both take it over."""
    fd = os.open(d, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def acquire(directory: str | Path, command: str | None = None) -> bool:
    """Claim `directory` (see the module rules); True if this call created the claim, False if this
    process tree already held it. ClaimError if another run holds it or the directory is unusable."""
    d = writable_dir(directory)
    path = d / CLAIM_FILE
    me = _owner(command)
    with _serialized(d):
        if _try_create(path, me):
            return True
        try:
            owner = _read(path)
            if owner is not None and owner.get("host") == me["host"] and owner.get("pid") in _ancestry():
                return False
            why = _why_stale(path, owner, me["host"])
        except FileNotFoundError:  # removed by a writer on another host between our two looks
            why = "gone"
        if why is None:
            if owner is None:
                raise ClaimError(f"{directory}: is being claimed by another run right now ({path})")
            hint = (f"; if that run is gone, remove {path}" if owner.get("host") != me["host"]
                    else "; wait for it to finish")
            raise ClaimError(f"{directory}: in use by another run ({describe(owner)}){hint}")
        if why != "gone":
            log.warning("%s: taking over a stale claim: %s", directory, why)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if _try_create(path, me):
            return True
    raise ClaimError(f"{directory}: another run claimed it at the same moment ({path})")


def release(directory: str | Path) -> None:
    """Remove the claim if it still names this process."""
    path = Path(directory) / CLAIM_FILE
    try:
        owner = _read(path)
    except FileNotFoundError:
        return
    if owner and owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def claim_dir(directory: str | Path, command: str | None = None) -> Iterator[Path]:
    """Hold `directory` for the block (see the module rules); yields it as a Path."""
    created = acquire(directory, command)
    try:
        yield Path(directory)
    finally:
        if created:
            release(directory)

"""What the store raises when a user can act on it: one line naming the file or URL, never a library's
traceback. `StoreError` is bad input (an unusable URL, a catalog that is not DuckDB, a manifest of another
layout); `DiskFull` is the fault of a full disk (or a file size limit, or a quota), raised after the
partial output it interrupted was removed, so freeing space and rerunning completes.
"""
from __future__ import annotations

import errno

# ENOSPC: the disk is full; EDQUOT: the user's quota is; EFBIG: a file size limit (RLIMIT_FSIZE: Python
# ignores SIGXFSZ, so the write fails instead) — to the store, all three are "no room to write this"
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class StoreError(ValueError):
    """A store, catalog or manifest this code cannot use; the message is one line naming it."""


class DiskFull(OSError):
    """No room to finish a write; the partial output was removed and what was there before is intact."""

    def __init__(self, message: str):
        super().__init__(errno.ENOSPC, message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # OSError pickles its (errno, strerror) args, which this __init__ does not take
        return type(self), (self.message,)

    @classmethod
    def writing(cls, what: str, cause: BaseException | None = None) -> "DiskFull":
        """`WHAT: no room left on the device (why)`, one line."""
        why = f" ({_cause(cause)})" if cause is not None else ""
        return cls(f"{what}: no room left on the device{why}; free space and rerun")


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether `exc` (or an exception it was raised from) says there is no room to write: an OSError with
    one of NO_ROOM's errnos, or a library's error whose text says so (DuckDB and Arrow report the OS error
    as text in their own exception types)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFull):
            return True
        if isinstance(exc, OSError) and exc.errno in NO_ROOM:
            return True
        text = str(exc)
        if "No space left on device" in text or "File too large" in text or "Disk quota exceeded" in text:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _cause(exc: BaseException) -> str:
    """The OS's words for it when the chain holds an OSError (a library's error often wraps one), else the
    error's type."""
    seen, e = set(), exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
        e = e.__cause__ or e.__context__
    return type(exc).__name__

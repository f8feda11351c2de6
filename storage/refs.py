"""A dataset reference: a store, optionally pinned to one dataset version, as users write it.

    --data ./klear-store            the store's current version
    --data ./klear-store#ds-0123    that version of the store

`DatasetRef.parse` and `str()` are the only places that know the `STORE#VERSION` syntax. `data_ref`
decides what a training `--data` value names: a store (a ref) or a canonical file (None).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

SEP = "#"
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # ids are `ds-<16 hex>`; never '/', '#' or spaces


@dataclass(frozen=True)
class DatasetRef:
    store: str  # the store root as given (a directory or an fsspec URL), kept verbatim so str() round-trips
    version: str | None = None  # a dataset version id; None: the store's current version

    def __post_init__(self):
        if isinstance(self.store, os.PathLike):
            object.__setattr__(self, "store", os.fspath(self.store))
        if not self.store:
            raise ValueError("dataset reference has an empty store")
        if self.version is not None and not _VERSION.fullmatch(self.version):
            what = "an empty dataset version" if not self.version else f"a malformed dataset version {self.version!r}"
            raise ValueError(f"{self.store}{SEP}{self.version}: {what} (expected STORE or STORE{SEP}VERSION)")

    @classmethod
    def parse(cls, text: str) -> DatasetRef:
        """`STORE` or `STORE#VERSION`; the last '#' splits, so a store path may contain '#' itself."""
        store, sep, version = text.rpartition(SEP)
        if not sep:
            return cls(text)
        if not store:
            raise ValueError(f"{text}: no store before '{SEP}' (expected STORE or STORE{SEP}VERSION)")
        return cls(store, version)

    @property
    def path(self) -> Path:
        """The store as a local path (only meaningful for a local store)."""
        return Path(self.store)

    def __str__(self) -> str:
        return self.store if self.version is None else f"{self.store}{SEP}{self.version}"


def data_ref(data: str) -> DatasetRef | None:
    """What a training `--data` value names: a local store (a ref, pinned with `#VERSION` or not), or
    None for anything else (a canonical .jsonl/.parquet file, which may not exist: the reader says so).
    An existing file or directory is taken as named, even with a '#' in its name. A value that names an
    existing store directory followed by a malformed `#VERSION` raises ValueError."""
    p = Path(data)
    if p.is_file():
        return None
    if p.is_dir():
        return DatasetRef(data)
    store, sep, _ = data.rpartition(SEP)
    if sep and store and Path(store).is_dir():
        return DatasetRef.parse(data)
    return None

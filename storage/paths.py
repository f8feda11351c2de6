"""Path helpers over fsspec, so a store root may be a local directory or a URL such as s3://bucket/x."""
from __future__ import annotations

import os
from typing import IO

import fsspec


def is_local(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


def join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts)])


def fs_for(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path


def exists(url: str) -> bool:
    fs, path = fs_for(url)
    return fs.exists(path)


def is_file(url: str) -> bool:
    fs, path = fs_for(url)
    return fs.isfile(path)


def open_binary(url: str, mode: str = "rb") -> IO[bytes]:
    return fsspec.open(url, mode).open()


def makedirs(url: str) -> None:
    fs, path = fs_for(url)
    fs.makedirs(path, exist_ok=True)


def absolute(url: str) -> str:
    return os.path.abspath(url) if is_local(url) and "://" not in url else url

"""Path helpers over fsspec, so a store root may be a local directory or a URL such as s3://bucket/x.

A URL whose protocol fsspec does not know, or whose file system library is not installed (s3fs for
s3://, gcsfs for gs://), is a StoreError naming the URL and what to install (`check_url`), never
fsspec's ImportError or ValueError from deep inside a read.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import IO

import fsspec

from storage.errors import StoreError


def is_local(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


def join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts)])


def url_problem(url: str) -> str | None:
    """Why `url` cannot be opened here (an unknown protocol, a file system library not installed), in a
    few words; None when it can (a local path always can). Each link of a chained URL (`a::b://x`) counts."""
    if is_local(url):
        return None
    for link in str(url).split("::"):
        protocol, _ = fsspec.core.split_protocol(link)
        try:
            fsspec.get_filesystem_class(protocol or "file")
        except ImportError as e:  # fsspec's message names the package: "Install s3fs to access S3"
            return f"{protocol}:// needs a library that is not installed ({str(e).strip() or 'ImportError'})"
        except ValueError:
            return f"unknown protocol {protocol}:// (fsspec has no file system by that name)"
    return None


def check_url(url: str) -> str:
    """`url`, or StoreError `URL: why` (url_problem)."""
    if why := url_problem(url):
        raise StoreError(f"{url}: {why}")
    return url


def fs_for(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    check_url(url)
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path


def exists(url: str) -> bool:
    fs, path = fs_for(url)
    return fs.exists(path)


def is_file(url: str) -> bool:
    fs, path = fs_for(url)
    return fs.isfile(path)


def open_binary(url: str, mode: str = "rb") -> IO[bytes]:
    check_url(url)
    return fsspec.open(url, mode).open()


def makedirs(url: str) -> None:
    fs, path = fs_for(url)
    fs.makedirs(path, exist_ok=True)


def absolute(url: str) -> str:
    return os.path.abspath(url) if is_local(url) and "://" not in url else url


def recorded(path: str) -> str:
    """`path` as a record keeps it (the catalog, a manifest, a lineage file): a local file path absolute and
    resolved (`..` and symlinks) against this process's working directory, the one it was given and read
    in, so the record names the same file from any other directory; a URL or a source spec (`hf:NAME`) as
    given."""
    return path if "://" in path or path.startswith("hf:") else str(Path(path).resolve())

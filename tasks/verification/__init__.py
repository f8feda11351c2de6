"""Code verification: run submissions against their tests in Docker sandboxes, spread over Dask.

Pure and importable without Prefect: `verify_rows(rows, config) -> list[dict]`, plus JSONL/Parquet IO.
"""
from tasks.verification.io import VerifyIOError, read_rows, write_rows
from tasks.verification.verify import VerifyConfig, VerifyError, verify_chunk, verify_rows

__all__ = ["VerifyConfig", "VerifyError", "VerifyIOError", "read_rows", "verify_chunk", "verify_rows",
           "write_rows"]

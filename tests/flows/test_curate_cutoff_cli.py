"""`klear curate` flags of code-aware decontamination and the cutoff date: a bad value is one line naming
the flag, exit 2, no traceback (a subprocess, as a user runs it)."""
from pathlib import Path

import pytest

from tests.flows.test_bad_input import assert_one_line, klear

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "curation" / "code_decontam" / "code.jsonl"


@pytest.mark.parametrize("flag, value, message", [
    ("--cutoff-date", "2024-13-01", "cutoff_date (--cutoff-date) 2024-13-01: not a calendar date written YYYY-MM-DD"),
    ("--cutoff-date", "last-year", "cutoff_date (--cutoff-date) last-year: not a calendar date written YYYY-MM-DD"),
    ("--undated", "maybe", "undated (--undated) must be one of drop, keep (got 'maybe')"),
    ("--test-overlap", "1.5", "test_overlap (--test-overlap) must be at most 1.0 (got 1.5)"),
])
def test_a_bad_value_is_one_line_naming_the_flag_exit_2(tmp_path, flag, value, message):
    r = klear("curate", "--source", f"s={SOURCE}", "--store", tmp_path / "store", flag, value)
    assert_one_line(r, message)
    assert not list((tmp_path / "store").glob("**/*.parquet"))  # refused before any row was curated

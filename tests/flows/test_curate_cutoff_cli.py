"""`klear curate` flags of code-aware decontamination and the cutoff date: a bad value is one line naming
the flag, exit 2, no traceback (a subprocess, as a user runs it)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "curation" / "code_decontam" / "code.jsonl"


@pytest.mark.parametrize("flag, value, message", [
    ("--cutoff-date", "2024-13-01", "--cutoff-date 2024-13-01: not a calendar date written YYYY-MM-DD"),
    ("--cutoff-date", "last-year", "--cutoff-date last-year: not a calendar date written YYYY-MM-DD"),
    ("--undated", "maybe", "--undated maybe: Input should be 'keep' or 'drop'"),
    ("--test-overlap", "1.5", "--test-overlap 1.5: Input should be less than or equal to 1"),
])
def test_a_bad_value_is_one_line_naming_the_flag_exit_2(tmp_path, flag, value, message):
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "ph"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    r = subprocess.run([sys.executable, "-m", "flows.cli", "curate", "--source", f"s={SOURCE}",
                        "--store", str(tmp_path / "store"), flag, value],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("klear: error: ") and message in lines[0], r.stderr[-3000:]
    assert not list((tmp_path / "store").glob("**/*.parquet"))  # refused before any row was curated

"""The `klear` CLI as a user runs it: a subprocess, one-line errors with exit 2, a summary table."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.curation.fixtures import write_corpus

KLEAR = [sys.executable, "-m", "flows.cli"]
ROOT = Path(__file__).resolve().parents[2]


def run(args, tmp_path, **env):
    e = {**os.environ, "PREFECT_HOME": str(tmp_path / "ph"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", **env}
    e.pop("PREFECT_API_URL", None)
    return subprocess.run(KLEAR + args, capture_output=True, text=True, cwd=ROOT, env=e, timeout=300)


@pytest.mark.parametrize("args, msg", [
    (["curate", "--source", "nonsense"], "--source 'nonsense': expected NAME=VALUE"),
    (["curate", "--source", "a=/no/such.jsonl"], "--source a=/no/such.jsonl: no such file"),
    (["curate", "--source", "a=data.csv"], "unknown source format"),
    (["curate", "--source", "a=x.jsonl", "--source", "a=y.jsonl"], "'a' given twice"),
    (["curate", "--bogus"], "No such option"),
])
def test_bad_invocations_are_one_line_exit_2(args, msg, tmp_path):
    r = run(args, tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and msg in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_layout_for_unknown_source_is_rejected(tmp_path):
    files = write_corpus(tmp_path / "in")
    r = run(["curate", "--source", f"a={files['a']}", "--layout", "zz=apps"], tmp_path)
    assert r.returncode == 2 and "no --source defines" in r.stderr


def test_broken_parquet_is_named(tmp_path):
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"PAR1 not really")
    r = run(["curate", "--source", f"x={bad}"], tmp_path)
    assert r.returncode == 2 and f"x={bad}: not a readable Parquet file" in r.stderr


@pytest.mark.slow
def test_curate_prints_summary_and_reruns_identically(tmp_path):
    files = write_corpus(tmp_path / "in")
    args = ["curate", "--source", f"a={files['a']}", "--source", f"b={files['b']}",
            "--benchmark", f"bench={files['bench']}", "--store", str(tmp_path / "store")]
    r1 = run(args, tmp_path)
    assert r1.returncode == 0, r1.stderr
    assert "TOTAL" in r1.stdout and "catalog.duckdb" in r1.stdout
    r2 = run(args, tmp_path)
    assert r2.returncode == 0, r2.stderr
    assert r1.stdout == r2.stdout


@pytest.mark.parametrize("extra, msg", [
    (["--domains", "math,poetry"], "--domains: expected a comma-separated subset of code, math"),
    (["--loss", "ppo2"], "--loss 'ppo2': unknown policy loss (known: cispo, gppo, grpo)"),
])
def test_rl_flag_errors_are_one_line(extra, msg, tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "d.jsonl"
    data.write_text('{"problem": "1+1?", "answer": "2"}\n')
    r = run(["rl", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"), *extra], tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == f"klear: error: {msg}", r.stderr


def test_sft_unknown_strategy_is_one_line(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "d.jsonl"
    data.write_text('{"problem": "1+1?", "response": "2"}\n')
    r = run(["sft", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"), "--nproc", "2",
             "--strategy", "zero3"], tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == "klear: error: --strategy must be one of ddp, fsdp, not 'zero3'", r.stderr


def test_data_pinned_to_a_missing_store_version_is_named(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (tmp_path / "store").mkdir()
    r = run(["sft", "--model", str(model), "--data", f"{tmp_path}/store#ds-0000", "--out", str(tmp_path / "o")], tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"klear: error: --data {tmp_path}/store#ds-0000: store {tmp_path}/store has no dataset version 'ds-0000'"


def test_data_with_an_empty_version_after_hash_is_one_line(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (tmp_path / "store").mkdir()
    r = run(["rl", "--model", str(model), "--data", f"{tmp_path}/store#", "--out", str(tmp_path / "o")], tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (f"klear: error: --data {tmp_path}/store#: an empty dataset version "
                                "(expected STORE or STORE#VERSION)")

"""`klear verify` / `klear sandbox` as a user runs them: one-line errors with exit 2, then a real run."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def klear(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def rows_file(tmp_path):
    path = tmp_path / "in.jsonl"
    rows = [{"id": "good", "code": "print(int(input()) * 2)", "tests": {"inputs": ["2\n"], "outputs": ["4\n"]}},
            {"id": "bad", "code": "def add(a, b):\n    return a", "tests": {"assert_code": "assert add(1, 2) == 3"}},
            {"id": "no-tests", "code": "print(1)"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("args, needle", [
    (["verify", "/nonexistent/in.jsonl", "--out", "o.jsonl"], "/nonexistent/in.jsonl: no such file"),
    (["verify", "{rows}", "--out", "o.csv"], "--out o.csv: output must end in .jsonl or .parquet"),
    (["verify", "{rows}", "--out", "o.jsonl", "--workers", "0"], "--workers 0: must be at least 1"),
    (["verify", "{rows}"], "--out"),
    (["verify", "{rows}", "--out", "{rows}"], "--out {rows}: is the input file"),
])
def test_bad_invocations_are_one_line_exit_2(rows_file, args, needle):
    r = klear(*[a.replace("{rows}", str(rows_file)) for a in args])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle.replace("{rows}", str(rows_file)) in lines[0] and "Traceback" not in r.stderr
    assert rows_file.read_text().endswith('"no-tests", "code": "print(1)"}\n')  # the input is untouched


def test_refused_input_creates_no_out_directory(tmp_path):
    bad = tmp_path / "in.parquet"
    bad.write_text("not parquet")
    out_dir = tmp_path / "new" / "dir"
    r = klear("verify", str(bad), "--out", str(out_dir / "o.jsonl"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("line, why", [
    ('{"id": "b", broken', "not JSON"),
    ('{"code": "print(1)", "tests": {"inputs": ["\\n"], "outputs": ["1\\n"]}}', "no id"),
    ('{"id": "good", "code": "print(1)"}', "duplicate id 'good' (first on row 1)"),
])
def test_a_bad_row_refuses_the_run_in_one_line_before_any_container(rows_file, tmp_path, line, why):
    """As `klear eval` refuses a bad benchmark file: exit 2, one line naming the file and row, no output.
    `--dask` names a scheduler nobody runs: the refusal comes before any connection or container."""
    rows_file.write_text(rows_file.read_text() + line + "\n")
    out = tmp_path / "out.jsonl"
    r = klear("verify", str(rows_file), "--out", str(out), "--dask", "tcp://127.0.0.1:9")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"klear: error: {rows_file} row 4: {why}") and not out.exists()


@pytest.mark.docker
def test_verify_end_to_end(rows_file, tmp_path):
    try:
        import docker

        docker.from_env().ping()
    except Exception:
        pytest.skip("no Docker engine")
    out = tmp_path / "out.jsonl"
    r = klear("verify", str(rows_file), "--out", str(out), "--workers", "1")
    assert r.returncode == 0, r.stderr
    assert "3 rows: " in r.stdout
    assert "verify rows 3/3 rows/s " in r.stderr  # the stages' progress line (tasks/progress.py), not a bar
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(x["id"], x["verdict"]) for x in results] == [
        ("good", "accepted"), ("bad", "wrong_answer"), ("no-tests", "invalid_tests")]
    assert results[2]["details"] == {"reason": "missing 'tests'"}
    build = klear("sandbox", "build")
    assert build.returncode == 0 and build.stdout.startswith("klear-sandbox:")

"""`klear curate --dask local --workers 2` (out of core, per-part work on a 2-worker LocalCluster) gives
the same dataset version, id and content, as the in-memory run; bad --memory-limit / --dask values are
one line naming the flag. Subprocesses, as a user runs them."""
import glob
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.curation.fixtures import write_corpus
from tests.flows.test_bad_input import klear



def _klear(*args: str):
    return klear("curate", *args, timeout=600)


def _sources(tmp_path: Path) -> list[str]:
    files = write_corpus(tmp_path / "data")
    return ["--source", f"a={files['a']}", "--source", f"b={files['b']}", "--benchmark", f"bench={files['bench']}"]


@pytest.mark.slow
def test_dask_local_gives_the_in_memory_version(tmp_path):
    args = _sources(tmp_path)
    mem = _klear(*args, "--store", str(tmp_path / "mem"))
    dask = _klear(*args, "--store", str(tmp_path / "dask"), "--dask", "local", "--workers", "2",
                  "--memory-limit", "512MB")
    assert mem.returncode == 0 and dask.returncode == 0, (mem.stderr + dask.stderr)[-3000:]
    versions = {v: glob.glob(str(tmp_path / v / "datasets" / "ds-*")) for v in ("mem", "dask")}
    assert len(versions["mem"]) == 1 and [Path(p).name for p in versions["mem"]] == [Path(p).name for p in versions["dask"]]
    for table in ("problems", "dropped"):
        want, got = (pq.read_table(Path(versions[v][0]) / f"{table}.parquet") for v in ("mem", "dask"))
        assert want.num_rows > 0 and got.equals(want), table


@pytest.mark.parametrize("flags, message", [
    (["--memory-limit", "lots"], "memory_limit (--memory-limit) 'lots' is not a size"),
    (["--memory-limit", "1MB"], "memory_limit (--memory-limit) '1MB' is below 64MiB"),
    (["--dask", "tcp://127.0.0.1:1", "--work-dir", "{tmp}/w"], "--dask tcp://127.0.0.1:1: cannot reach the scheduler"),
    (["--dask", "tcp://127.0.0.1:1"], "work_dir (--work-dir) must be given with --dask tcp://127.0.0.1:1"),
    (["--memory-limit", "1GB", "--work-dir", "{tmp}/run[1]"], "work_dir (--work-dir) {tmp}/run[1]: "),
])
def test_a_bad_value_is_one_line_naming_the_flag(tmp_path, flags, message):
    flags, message = [f.format(tmp=tmp_path) for f in flags], message.format(tmp=tmp_path)
    r = _klear(*_sources(tmp_path), "--store", str(tmp_path / "store"), *flags)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert lines[-1].startswith("klear: error: ") and message in lines[-1], r.stderr[-3000:]

"""`klear eval --benchmark b=data/bench.jsonl` records the benchmark's absolute path (the catalog's
`evaluations.benchmark_path`, and the summary line printed from the same row), so the row still names the
file after the user changes directory. No model: a weights file to hash and a result built by hand."""
import os

from storage.store import Store
from tasks.evaluation.config import EvalConfig
from tasks.evaluation.evaluate import EvalResult
from tasks.evaluation.record import record_evaluation


def test_a_relative_benchmark_path_is_recorded_absolute(tmp_path, monkeypatch):
    tmp_path = tmp_path.resolve()
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "bench.jsonl").write_text('{"problem": "1+1?", "answer": "2"}\n')
    monkeypatch.chdir(tmp_path)
    solved = {"id": "a", "domain": "math", "correct": 1, "n": 1, "infra": 0, "scores": [1.0], "sample": "2"}
    result = EvalResult("bench", "data/bench.jsonl", 1, 0, 1.0, 1.0, 1, [solved])
    row = record_evaluation("model", result, EvalConfig(k=1), "store")
    os.chdir("/")
    want = str(tmp_path / "data" / "bench.jsonl")
    assert row["benchmark_path"] == want
    assert Store(str(tmp_path / "store")).catalog.query("SELECT benchmark_path FROM evaluations") == [(want,)]
    assert os.path.isfile(want)

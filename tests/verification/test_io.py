"""JSONL/Parquet in and out. No Docker."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.verification.io import VerifyIOError, output_kind, read_rows, write_rows

RESULTS = [
    {"id": "a", "verdict": "accepted", "passed": 2, "total": 2, "reward": 1.0, "details": {"tests": [1, 2]}},
    {"id": None, "verdict": "sandbox_error", "passed": 0, "total": 0, "reward": None, "details": {"reason": "x"}},
]


def test_read_jsonl_skips_blank_lines(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 1, "code": "x"}\n\n  \n{"id": 2}\n')
    assert read_rows(str(path)) == [{"id": 1, "code": "x"}, {"id": 2}]


def test_read_parquet(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "a", "code": "x", "tests": json.dumps({"assert_code": "1"})}]), path)
    assert read_rows(str(path)) == [{"id": "a", "code": "x", "tests": '{"assert_code": "1"}'}]


@pytest.mark.parametrize("name, why", [("missing.jsonl", "no such file"), ("in.csv", "unknown source format")])
def test_unreadable_inputs_name_the_file(tmp_path, name, why):
    (tmp_path / "in.csv").write_text("a,b\n")
    with pytest.raises(VerifyIOError, match=why) as exc:
        read_rows(str(tmp_path / name))
    assert name in str(exc.value)


def test_output_kinds():
    assert output_kind("x.jsonl") == "jsonl" and output_kind("s3://b/x.parquet") == "parquet"
    for bad in ("x.csv", "x", "x.jsonl.gz"):
        with pytest.raises(VerifyIOError, match="must end in .jsonl or .parquet"):
            output_kind(bad)


def test_write_jsonl_and_parquet(tmp_path):
    write_rows(RESULTS, str(tmp_path / "out.jsonl"))
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert lines == RESULTS
    write_rows(RESULTS, str(tmp_path / "sub" / "out.parquet"))
    table = pq.read_table(tmp_path / "sub" / "out.parquet")
    assert table.column_names == ["id", "verdict", "passed", "total", "reward", "details"]
    rows = table.to_pylist()
    assert rows[1]["reward"] is None and json.loads(rows[0]["details"]) == {"tests": [1, 2]}
    assert list(tmp_path.glob("**/*.tmp-*")) == []


def test_parquet_ids_keep_ints_and_stringify_mixed(tmp_path):
    write_rows([dict(RESULTS[0], id=7), dict(RESULTS[0], id=None)], str(tmp_path / "a.parquet"))
    assert pq.read_table(tmp_path / "a.parquet").column("id").to_pylist() == [7, None]
    write_rows([dict(RESULTS[0], id=7), dict(RESULTS[0], id="x")], str(tmp_path / "b.parquet"))
    assert pq.read_table(tmp_path / "b.parquet").column("id").to_pylist() == ["7", "x"]


def test_a_lone_surrogate_never_loses_the_batch(tmp_path):
    """One result holding a string no UTF-8 file can hold (a lone surrogate a program reported) is
    written escaped; every other row is written as is."""
    bad = dict(RESULTS[0], id="b\ud800", details={"message": "exc \ud800", "k\udfff": [{"x": "\udc80"}]})
    odd = dict(RESULTS[0], id="c", details={(1, 2): "tuple key", "obj": object()})
    rows = [RESULTS[0], bad, odd, RESULTS[1]]
    write_rows(rows, str(tmp_path / "out.jsonl"))
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 4 and lines[0] == RESULTS[0] and lines[3] == RESULTS[1]
    assert lines[1]["id"] == "b\\ud800" and lines[1]["verdict"] == "accepted"
    assert lines[1]["details"] == {"message": "exc \\ud800", "k\\udfff": [{"x": "\\udc80"}]}
    assert lines[2]["details"]["[1, 2]"] == "tuple key" and "object" in lines[2]["details"]["obj"]
    write_rows(rows, str(tmp_path / "out.parquet"))
    got = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert [r["id"] for r in got] == ["a", "b\\ud800", "c", None]
    assert json.loads(got[1]["details"])["message"].encode("utf-8")  # valid text either way
    assert json.loads(got[2]["details"])["[1, 2]"] == "tuple key"
    assert json.loads(got[0]["details"]) == RESULTS[0]["details"]
    assert list(tmp_path.glob("*.tmp-*")) == []


OK = b'{"id": "ok", "code": "x", "tests": {"assert_code": "assert f(1) == 1"}}'


@pytest.mark.parametrize("line, why", [
    (rb'{"id": "s", "code": "print(\"\ud800\")"}', "lone surrogate \\ud800"),
    (b"[" * 100_000, "nested deeper than"),
    (b'{"id": "t", "code": "x", "tests": "' + b"[" * 5000 + b'"}', "tests: nested deeper than"),
    (b'{"id": "u", "code": "x", "tests": "{\\"inputs\\": [\\"\\\\ud800\\"]}"}', "tests: lone surrogate"),
    (b'{"id": 1' + b"0" * 5000 + b'}', "not JSON"),
    (b'{"id": "\xff"}', "not UTF-8"),
])
def test_an_unreadable_row_refuses_the_file_in_one_line_naming_it(tmp_path, line, why):
    """A user's input fault, not a per-row sandbox_error: the run stops at the row (input_rules.py)."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(OK + b"\n" + line + b"\n" + OK.replace(b'"ok"', b'"ok2"') + b"\n")
    with pytest.raises(VerifyIOError) as exc:
        read_rows(str(path))
    message = str(exc.value)
    assert message.startswith(f"{path} row 2: ") and why in message and "\n" not in message


def test_bare_cr_inside_a_line_keeps_it_one_row(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"id": "a",\r "code": "x"}\r\n' + OK + b"\n")
    assert read_rows(str(path)) == [{"id": "a", "code": "x"}, json.loads(OK)]


def test_ids_beyond_64_bits_become_text_never_a_lost_batch(tmp_path):
    big = dict(RESULTS[0], id=2 ** 70)
    write_rows([big, dict(RESULTS[0], id=7)], str(tmp_path / "a.parquet"))
    assert pq.read_table(tmp_path / "a.parquet").column("id").to_pylist() == [str(2 ** 70), "7"]
    write_rows([dict(RESULTS[0], id=-(2 ** 63)), dict(RESULTS[0], id=2 ** 63 - 1)], str(tmp_path / "b.parquet"))
    assert pq.read_table(tmp_path / "b.parquet").column("id").type == pa.int64()
    write_rows([big], str(tmp_path / "a.jsonl"))
    assert json.loads((tmp_path / "a.jsonl").read_text())["id"] == 2 ** 70


def test_a_uint64_parquet_id_column_round_trips(tmp_path):
    pq.write_table(pa.table({"id": pa.array([1, 2 ** 64 - 1], pa.uint64()), "code": ["x", "x"]}),
                   tmp_path / "in.parquet")
    rows = read_rows(str(tmp_path / "in.parquet"))
    write_rows([dict(RESULTS[0], id=r["id"]) for r in rows], str(tmp_path / "out.parquet"))
    assert pq.read_table(tmp_path / "out.parquet").column("id").to_pylist() == ["1", str(2 ** 64 - 1)]


def test_same_file():
    from tasks.verification.io import same_file

    assert same_file("a/in.jsonl", "a/../a/in.jsonl") and same_file("file:///x/in.jsonl", "/x/in.jsonl")
    assert not same_file("in.jsonl", "out.jsonl") and not same_file("s3://b/in.jsonl", "s3://b/out.jsonl")

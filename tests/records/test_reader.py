"""The one reader's bad-row rule: a bad row (unparsable, or refused by the caller's check) stops the read in
one line naming file and row, or goes to the caller's `on_bad` and is skipped; a blank line is not a row; a
store's rows come as stored."""
import logging

import pyarrow as pa
import pytest

from storage.refs import DatasetRef
from storage.store import DatasetVersion, Store
from tasks.records.reader import BadRow, BadRowError, read_records, warn_skipped


def _file(tmp_path, *lines: bytes):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)


def _even(value):
    if value["n"] % 2:
        raise ValueError(f"n is odd:\n{value['n']}")
    return value["n"]


def test_a_bad_row_stops_the_read_in_one_line(tmp_path):
    path = _file(tmp_path, b'{"n": 2}', b"", b"{oops", b'{"n": 4}')
    with pytest.raises(BadRowError) as exc:
        list(read_records(path, _even))
    assert str(exc.value).startswith(f"{path} row 3: not JSON (") and "\n" not in str(exc.value)
    assert (exc.value.bad.source, exc.value.bad.row) == (path, 3)
    with pytest.raises(BadRowError, match=rf"^{path} row 2: n is odd: 3$"):  # the check's reason, one line
        list(read_records(_file(tmp_path, b'{"n": 2}', b'{"n": 3}'), _even))


def test_skipping_hands_each_bad_row_to_the_caller_and_keeps_row_numbers(tmp_path):
    path = _file(tmp_path, b'{"n": 2}', b"", b'{"n": 3}', b"{oops", b'{"n": 6}', b"[" * 200 + b"]" * 200)
    bad = []
    rows = list(read_records(path, _even, on_bad=bad.append))
    assert [(r.row, r.value) for r in rows] == [(1, 2), (5, 6)]  # line 2 is blank: not a row, not a bad one
    assert [(b.row, b.reason.split(" (")[0]) for b in bad] == [(3, "n is odd: 3"), (4, "not JSON"),
                                                               (6, "nested deeper than 100 levels")]
    assert str(bad[0]) == f"{path} row 3: n is odd: 3"


def test_an_error_no_check_foresaw_is_one_bad_row_but_a_bug_is_not(tmp_path):
    path = _file(tmp_path, b'{"n": 2}')

    def deep(value):
        raise RecursionError

    assert [b.reason for b in _bad(path, deep)] == ["unusable row (RecursionError)"]
    with pytest.raises(KeyError):  # not a ValueError: the check's own bug, not the row's fault
        list(read_records(path, lambda value: value["missing"], on_bad=lambda b: None))


def _bad(path, check):
    bad = []
    list(read_records(path, check, on_bad=bad.append))
    return bad


def test_warn_skipped_logs_one_line_per_row(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        warn_skipped(logging.getLogger("t"), "corpus")(BadRow("a.jsonl", 7, "not JSON"))
    assert caplog.messages == ["corpus: skipped a.jsonl row 7: not JSON"]


def test_a_store_ref_reads_its_version_as_stored(tmp_path):
    store = Store(str(tmp_path / "s"))
    for vid, problems in {"ds-a": ["x"], "ds-b": ["y", "z"]}.items():
        rows = [{"id": p, "problem": p} for p in problems]
        store.write_version(DatasetVersion(id=vid, kind="curate", parameters={}, counts={"kept": len(rows)},
                                           rows_in=len(rows)), {"problems": pa.Table.from_pylist(rows)})
    store.publish("ds-b")
    assert [(r.row, r.value["problem"]) for r in read_records(DatasetRef(store.root))] == [(1, "y"), (2, "z")]
    assert [r.value["problem"] for r in read_records(DatasetRef(store.root, "ds-a"), check=_even)] == ["x"]
    with pytest.raises(ValueError, match="no dataset version ds-gone"):
        list(read_records(DatasetRef(store.root, "ds-gone")))

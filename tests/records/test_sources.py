"""Source readers: every bad row becomes one RawRow with its 1-based number and a one-line reason; the
rows around it are read as usual. One hostile row per test."""
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.records.sources import MAX_DEPTH, SourceError, check_source_file, check_value, read_source

GOOD = b'{"problem": "What is 1+1?", "answer": "2"}'


def _read(tmp_path, *lines: bytes, name="in.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return list(read_source(str(path)))


def _bad_in_the_middle(rows, why):
    assert [r.row for r in rows] == [1, 2, 3]
    assert rows[0].error is None and rows[2].error is None and rows[2].value == json.loads(GOOD)
    assert rows[1].value is None and why in rows[1].error and "\n" not in rows[1].error
    return rows[1]


def test_lone_surrogate_escape_is_a_bad_row(tmp_path):
    bad = _bad_in_the_middle(_read(tmp_path, GOOD, rb'{"problem": "x \ud800 y"}', GOOD), "lone surrogate \\ud800")
    assert bad.raw == r'{"problem": "x \ud800 y"}'  # the line as text, valid UTF-8


def test_surrogate_pair_and_a_surrogate_in_a_key(tmp_path):
    rows = _read(tmp_path, rb'{"problem": "\ud83d\ude00"}', rb'{"\udfff": 1, "problem": "p"}', GOOD)
    assert rows[0].value == {"problem": "\U0001f600"}
    assert "lone surrogate \\udfff" in rows[1].error


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_deep_nesting_is_a_bad_row(tmp_path, depth):
    _bad_in_the_middle(_read(tmp_path, GOOD, b"[" * depth + b"]" * depth, GOOD), f"nested deeper than {MAX_DEPTH}")


def test_nesting_up_to_the_limit_is_read(tmp_path):
    ok = b'{"problem": "p", "x": ' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}"
    assert _read(tmp_path, ok)[0].error is None


def test_bare_cr_inside_a_line_keeps_it_one_row(tmp_path):
    rows = _read(tmp_path, b'{"problem": "What is 1+1?",\r "answer": "2"}', b'{"problem": "a\\rb"}\r', GOOD)
    assert [r.error for r in rows] == [None, None, None]
    assert rows[0].value == {"problem": "What is 1+1?", "answer": "2"} and rows[1].value == {"problem": "a\rb"}


def test_other_unicode_line_breaks_stay_inside_the_line(tmp_path):
    rows = _read(tmp_path, '{"problem": "a\u2028b\u0085c\u2029d"}'.encode(), GOOD)
    assert len(rows) == 2 and rows[0].value == {"problem": "a\u2028b\u0085c\u2029d"}


def test_not_utf8_is_a_bad_row(tmp_path):
    _bad_in_the_middle(_read(tmp_path, GOOD, b'{"problem": "\xff"}', GOOD), "not UTF-8 (byte 0xff at byte 14)")


def test_an_integer_too_long_to_parse_is_a_bad_row(tmp_path):
    _bad_in_the_middle(_read(tmp_path, GOOD, b'{"answer": ' + b"9" * 5000 + b"}", GOOD), "not JSON")


def test_bom_on_the_first_line_is_ignored(tmp_path):
    assert _read(tmp_path, b"\xef\xbb\xbf" + GOOD)[0].value == json.loads(GOOD)


def test_gzip_lines_split_the_same_way(tmp_path):
    path = tmp_path / "in.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"problem": "a",\r "answer": "1"}\n' + rb'{"problem": "\ud800"}' + b"\n"))
    rows = list(read_source(str(path)))
    assert rows[0].value == {"problem": "a", "answer": "1"} and "lone surrogate" in rows[1].error


def test_truncated_gzip_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "in.jsonl.gz"
    path.write_bytes(gzip.compress(GOOD + b"\n" * 2000)[:-30])
    with pytest.raises(SourceError, match="in.jsonl.gz: cannot read past line"):
        list(read_source(str(path)))


def test_parquet_row_arrow_cannot_decode_is_a_bad_row(tmp_path):
    offsets = pa.array(["ok", "xx", "ok"], pa.string()).buffers()[1]
    column = pa.Array.from_buffers(pa.string(), 3, [None, offsets, pa.py_buffer(b"ok\xff\xfeok")])
    pq.write_table(pa.table({"problem": column}), tmp_path / "in.parquet")
    rows = list(read_source(str(tmp_path / "in.parquet")))
    assert [r.value for r in rows] == [{"problem": "ok"}, None, {"problem": "ok"}]
    assert rows[1].row == 2 and "unreadable row (UnicodeDecodeError" in rows[1].error


def test_check_value_is_iterative():
    deep = []
    for _ in range(50_000):
        deep = [deep]
    assert check_value(deep) == f"nested deeper than {MAX_DEPTH} levels"
    assert check_value({"a": [{"b": "ok"}], "c": None, "d": 1.5}) is None


def test_float32_values_at_any_depth_are_their_shortest_decimal(tmp_path):
    table = pa.table({"a": pa.array([0.1], pa.float32()), "h": pa.array([0.1], pa.float16()),
                      "d": pa.array([0.10000000149011612], pa.float64()),
                      "s": pa.array([{"x": 0.1, "xs": [0.3, None]}],
                                    pa.struct([("x", pa.float32()), ("xs", pa.list_(pa.float32()))])),
                      "m": pa.array([[("k", 2.2)]], pa.map_(pa.string(), pa.float32()))})
    pq.write_table(table, tmp_path / "f.parquet")
    (row,) = read_source(str(tmp_path / "f.parquet"))
    assert row.value == {"a": 0.1, "h": 0.1, "d": 0.10000000149011612,  # a double as it is
                         "s": {"x": 0.1, "xs": [0.3, None]}, "m": [("k", 2.2)]}


def test_an_integral_narrow_float_keeps_its_exact_value(tmp_path):
    """The shortest decimal of float16 65504 is 65500 and of float32 123456792 is 123456790: other numbers;
    an integral value is read as itself."""
    pq.write_table(pa.table({"h": pa.array([65504.0], pa.float16()), "f": pa.array([123456792.0], pa.float32())}),
                   tmp_path / "i.parquet")
    (row,) = read_source(str(tmp_path / "i.parquet"))
    assert row.value == {"h": 65504.0, "f": 123456792.0}


def test_a_one_line_json_array_longer_than_the_sniffed_head_is_refused(tmp_path):
    """json.dump of a real dataset: one line, far past the bytes sniffed, opening with `[{`."""
    path = tmp_path / "big.json"
    path.write_text(json.dumps([{"problem": f"row {i} " + "x" * 100} for i in range(2000)]))
    with pytest.raises(SourceError, match="a JSON array, not JSON Lines"):
        check_source_file(str(path))


ARRAY = json.dumps([{"problem": "array row 1"}, {"problem": "array row 2"}], indent=2).encode()


@pytest.mark.parametrize("name, content, why", [
    ("rows.json", ARRAY, "a JSON array, not JSON Lines (one object per line): convert it with "
                         "jq -c '.[]' {dir}/rows.json > {dir}/rows.jsonl"),
    ("rows.jsonl", b"\xef\xbb\xbf \n" + ARRAY, "a JSON array, not JSON Lines (one object per line): "
                                            "convert it with jq -c '.[]' {dir}/rows.jsonl > {dir}/rows-lines.jsonl"),
    ("one.json", json.dumps([{"problem": "a"}, {"problem": "b"}]).encode() + b"\n",  # json.dump's one line
     "a JSON array, not JSON Lines (one object per line): convert it with "
     "jq -c '.[]' {dir}/one.json > {dir}/one.jsonl"),
    ("rows.jsonl.gz", gzip.compress(ARRAY, mtime=0),  # mtime 0: the same bytes in every test process
     "a JSON array, not JSON Lines (one object per line): convert it with "
     "gunzip -c {dir}/rows.jsonl.gz | jq -c '.[]' > {dir}/rows.jsonl"),
    ("fake.jsonl", b"PAR1\x15\x04", "a Parquet file (PAR1 magic) named .jsonl: name it .parquet"),
    ("g.jsonl", gzip.compress(GOOD, mtime=0), "gzip-compressed data named .jsonl: name it .jsonl.gz"),
    ("plain.jsonl.gz", GOOD, "named .jsonl.gz but not gzip-compressed (no gzip magic)"),
])
def test_a_file_that_is_not_json_lines_is_one_line_naming_what_it_is(tmp_path, name, content, why):
    path = tmp_path / name
    path.write_bytes(content)
    for check in (check_source_file, lambda p: list(read_source(p))):  # before any row is read
        with pytest.raises(SourceError) as e:
            check(str(path))
        assert str(e.value) == f"{path}: {why.format(dir=tmp_path)}"


def test_a_json_lines_file_whose_first_row_is_an_array_is_read_as_json_lines(tmp_path):
    rows = _read(tmp_path, b'[{"problem": "a row that is an array"}]', GOOD)
    assert rows[0].value == [{"problem": "a row that is an array"}] and rows[1].value == json.loads(GOOD)
    assert _read(tmp_path, b"[1, 2]")[0].value == [1, 2]  # a lone row, not an array of objects

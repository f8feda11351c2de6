"""Rows on disk: the run's workspace, the runners of per-part work, and the dedup and decontamination rules
of exact_dedup.py, near_dedup.py and decontaminate.py over Parquet parts, within a memory limit.

Input: `Parts`, Parquet files of bounded size holding `_ord` (int64, the global order: earlier wins) and a
text column. Work that reads text runs per part (`LocalRunner` in this process, or `DaskRunner` on Dask
workers: `part_runner`); what groups across parts is a DuckDB query under its share of the limit
(memory.py), spilling to the run's directory.

1. exact dedup: rows with equal keys are duplicates of the row with the smallest `_ord`
       SELECT key, min(_ord) FROM keys GROUP BY key HAVING count(*) > 1
   and when the keys are hashes of the text (`add_exact_keys`), every pair is confirmed on the
   normalised text.
2. near dedup, on the rows not dropped before: when their estimated working set fits in the limit's share
   (memory.near_whole_bytes), near_dedup.near_duplicate_of on all of them as one array, in one task.
   Otherwise per part MinHash signatures and their LSH band keys (near_dedup.band_keys); per band, DuckDB
   groups the keys: in each bucket of ≥ 2 rows, by `_ord`, edges head → member and previous → member
   (near_dedup.band_edges' rule); the edges' endpoints get their signatures recomputed (per part, only
   those rows), the estimated Jaccard is checked, pairs within the margin get the exact Jaccard, verified
   pairs the numbers rule, and the connected components keep their smallest `_ord`. Both ways find the
   same pairs (tests/curation/test_out_of_core.py).
3. decontamination, on the rows near dedup kept: per part, the rows' benchmark k-gram document
   frequencies and candidate rows (decontaminate.Decontaminator.scan), the candidates' texts written
   aside; summed, the frequencies fix the training-side boilerplate; then the candidates are checked
   (Decontaminator.check), a batch at a time.

Memory: Python work holds one part at a time (per worker), or near dedup's one array when it fits, plus
arrays that grow with the rows dropped or flagged, not with all rows: the `_ord`s of earlier drops (8 bytes
each), the verified near-duplicate edges and their components (~40 bytes per near duplicate),
decontamination's candidate rows (8 bytes each).
"""
from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tasks.curation import memory
from tasks.curation import near_dedup as nd
from tasks.curation import ngrams as ng
from tasks.curation.decontaminate import DecontamConfig, Decontaminator
from tasks.curation.exact_dedup import exact_keys, same_normalized
from tasks.dask_client import dask_cluster

ORD = "_ord"
def lit(value: object) -> str:
    """A SQL string literal (quotes doubled), for paths and names inside queries."""
    return "'" + str(value).replace("'", "''") + "'"


def read(paths: list) -> str:
    """SQL reading the Parquet files `paths` as one table (columns matched by name)."""
    return "read_parquet([" + ", ".join(lit(p) for p in paths) + "], union_by_name = true)"


GLOB_CHARACTERS = "*?[]{}"  # DuckDB reads a Parquet path as a glob pattern


def check_work_dir(path: str) -> str:
    """`path`, unless it holds a glob character (then every file path under it would be read as a pattern,
    matching other directories or none): ValueError naming the character."""
    bad = sorted({c for c in str(path) if c in GLOB_CHARACTERS})
    if bad:
        raise ValueError(f"{path}: a work directory must not contain {' '.join(bad)} (file paths are read as patterns)")
    return path


@dataclass(frozen=True)
class OutOfCoreConfig:
    memory_limit: str | int = "4GB"  # peak memory of the whole run, roughly (a size, or bytes): memory.py
    batch_rows: int | None = None  # rows per part; None: memory.part_rows of the limit
    work_dir: str | None = None  # where the run's directory of parts and spill files goes (removed afterwards);
    #   on a Dask cluster a path every worker can reach; None: the system's temporary directory
    threads: int = 2  # DuckDB threads and tokenisation threads per part; the machine has 2 cores
    batch_bytes: int | None = None  # bytes of row text per part; None: memory.part_bytes of the limit
    whole_bytes: int | None = None  # near dedup on one array up to this estimated working set; None: from the limit

    @property
    def limit_bytes(self) -> int:
        return self.memory_limit if isinstance(self.memory_limit, int) else memory.parse_size(self.memory_limit)

    @property
    def part_rows(self) -> int:
        return self.batch_rows or memory.part_rows(self.limit_bytes)

    @property
    def part_bytes(self) -> int:
        return self.batch_bytes or memory.part_bytes(self.limit_bytes)

    @property
    def near_whole_limit(self) -> int:
        return self.limit_bytes // memory.WHOLE_SHARE if self.whole_bytes is None else self.whole_bytes


class Workspace:
    """A fresh run directory (inside `work_dir`, or the system's temporary directory), removed on close, and
    a DuckDB database in it whose memory is capped and which spills there."""

    def __init__(self, config: OutOfCoreConfig):
        self.config = config
        if config.work_dir is not None:
            check_work_dir(config.work_dir)
            Path(config.work_dir).mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix="klear-curate-", dir=config.work_dir))
        try:
            self.con = duckdb.connect(str(self.root / "work.duckdb"))
            self.con.execute(f"SET memory_limit = '{max(16, memory.duckdb_bytes(config.limit_bytes) // 2**20)}MiB'")
            self.con.execute(f"SET temp_directory = {lit(self.root / 'spill')}")
            self.con.execute(f"SET threads = {max(1, config.threads)}")
            self.con.execute("SET preserve_insertion_order = false")
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def dir(self, name: str) -> Path:
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def close(self) -> None:
        self.con.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def batches(self, sql: str, rows: int = 65_536) -> Iterator[pa.RecordBatch]:
        cursor = self.con.cursor()  # its own result, so the main connection can write meanwhile
        try:
            yield from cursor.sql(sql).to_arrow_reader(rows)
        finally:
            cursor.close()

    def ords_by_part(self, parts: "Parts", table: str, column: str = ORD) -> list[np.ndarray]:
        """The `_ord`s of `table` (sorted) split by the parts' ranges."""
        ords = np.sort(self.column(f"SELECT {column} FROM {table}"))
        return [ords[np.searchsorted(ords, lo): np.searchsorted(ords, hi, side="right")] for lo, hi in parts.ranges]

    def skip(self, parts: "Parts", drops: list) -> list[np.ndarray]:
        """Per part, the sorted `_ord`s listed in the Parquet files `drops` (rows earlier steps dropped)."""
        return self.ords_by_part(parts, read(drops)) if drops else [np.zeros(0, np.int64) for _ in parts.files]

    def column(self, sql: str) -> np.ndarray:
        out = [b.column(0).to_numpy() for b in self.batches(sql)]
        return np.concatenate(out) if out else np.zeros(0, np.int64)


@dataclass
class Parts:
    """Parquet parts of one table, in `_ord` order, with each part's (first, last) `_ord`."""

    files: list[str]
    ranges: list[tuple[int, int]]
    text: str = "text"

    @property
    def sql(self) -> str:
        return read(self.files) if self.files else f"(SELECT NULL::BIGINT AS {ORD}, NULL::VARCHAR AS {self.text} LIMIT 0)"

    def size(self) -> tuple[int, int]:
        """(rows, uncompressed bytes of the text column), from the files' Parquet metadata."""
        rows = nbytes = 0
        for f in self.files:
            md = pq.read_metadata(f)
            rows += md.num_rows
            for g in range(md.num_row_groups):
                group = md.row_group(g)
                nbytes += sum(group.column(c).total_uncompressed_size for c in range(group.num_columns)
                              if group.column(c).path_in_schema == self.text)
        return rows, nbytes


def text_file(part: str) -> str:
    """The part's Arrow IPC file of (`_ord`, text), one record batch: the steps memory-map it, so a text
    read by several steps is never decoded or copied (DuckDB reads the Parquet part)."""
    return str(Path(part).with_suffix(".arrow"))


def write_text_file(part: str, ords: pa.Array, texts: pa.Array, text: str = "text") -> None:
    batch = pa.record_batch({ORD: ords, text: texts.cast(pa.large_string())})
    with pa.OSFile(text_file(part), "wb") as f, pa.ipc.new_file(f, batch.schema) as w:
        w.write_batch(batch)


def write_part(t: pa.Table, path: str, text: str = "text") -> None:
    """A part of (`_ord`, text): Parquet (uncompressed: random text hardly compresses) and its text file."""
    pq.write_table(t, path, compression="none")
    write_text_file(path, t.column(ORD).combine_chunks(), t.column(text).combine_chunks(), text)


def write_parts(batches: Iterator[pa.Table], out: Path, text: str = "text") -> Parts:
    """Write tables (each with an `_ord` column, ascending across tables) as numbered parts."""
    files, ranges = [], []
    for i, t in enumerate(batches):
        if t.num_rows == 0:
            continue
        path = str(out / f"part-{i:06d}.parquet")
        write_part(t, path, text)
        o = t.column(ORD)
        files.append(path)
        ranges.append((int(o[0].as_py()), int(o[-1].as_py())))
    return Parts(files, ranges, text)


def parts_from_array(texts: pa.Array, ws: Workspace) -> Parts:
    """An in-memory text array (`_ord` = index) as parts (benches and tests)."""
    arr = ng.to_arrow(texts)
    n, step = len(arr), ws.config.part_rows
    gen = (pa.table({ORD: pa.array(np.arange(s, min(n, s + step), dtype=np.int64)), "text": arr.slice(s, step)})
           for s in range(0, n, step))
    return write_parts(gen, ws.dir("rows"))


# ------------------------------------------------------------------------------------------ runners

PartFn = Callable[..., object]


class LocalRunner:
    """Runs part functions one after the other in this process."""

    def map(self, fn: PartFn, args: list[tuple]) -> Iterator[object]:
        for a in args:
            yield fn(*a)


class DaskRunner:
    """Runs part functions on a Dask cluster, one task per part, results in part order. The parts and
    outputs are files, so the work directory must be a path every worker reads and writes (on one machine
    any directory; on a cluster a shared filesystem)."""

    def __init__(self, client):
        self.client = client

    def map(self, fn: PartFn, args: list[tuple]) -> Iterator[object]:
        futures = [self.client.submit(fn, *a, pure=False) for a in args]
        for f in futures:
            yield f.result()


@contextmanager
def part_runner(dask: str | None, workers: int = 2, connect_timeout: str = "15s") -> Iterator[LocalRunner | DaskRunner]:
    """None: this process; "local": a LocalCluster of `workers` single-threaded worker processes (the
    signature work holds the GIL in rensa's export, so threads would not run in parallel); otherwise the
    address of an existing scheduler (DaskError when none answers). Set up and closed by
    tasks/dask_client.py, as verification's cluster is."""
    if dask is None:
        yield LocalRunner()
        return
    with dask_cluster(None if dask == "local" else dask, workers, timeout=connect_timeout) as (client, _):
        yield DaskRunner(client)


def _read_part(path: str, text: str, keep: np.ndarray | None = None, drop: np.ndarray | None = None):
    """(`_ord`s, texts as one large_string array) of a part's rows in `keep` (all when None), not in `drop`;
    from the part's memory-mapped text file, or its Parquet file when it has none."""
    if Path(text_file(path)).exists():
        t = pa.ipc.open_file(pa.memory_map(text_file(path))).read_all()
    else:
        t = pq.read_table(path, columns=[ORD, text])
    ords = t.column(ORD).to_numpy()
    mask = np.ones(len(ords), bool)
    if drop is not None and len(drop):
        mask &= ~np.isin(ords, drop)
    if keep is not None:
        mask &= np.isin(ords, keep)
    texts = ng.to_arrow(t.column(text))
    if mask.all():
        return ords, texts
    idx = np.flatnonzero(mask)
    return ords[idx], texts.take(pa.array(idx))


# ------------------------------------------------------------------------------------------ exact


def key_part(path: str, text: str, out: str) -> int:
    """(`_ord`, `key`) of a part's rows, the key a hash of the normalised text (exact_keys), → `out`."""
    ords, texts = _read_part(path, text)
    pq.write_table(pa.table({ORD: ords, "key": exact_keys(texts).view(np.int64)}), out)
    return len(ords)


def add_exact_keys(ws: Workspace, parts: Parts, runner=None) -> str:
    """SQL (`_ord`, `key`) of every row, for texts without a content id: exact_duplicates then confirms
    each pair on the text (texts=parts)."""
    out = [str(ws.dir("keys") / Path(f).name) for f in parts.files]
    list((runner or LocalRunner()).map(key_part, [(f, parts.text, o) for f, o in zip(parts.files, out)]))
    return read(out) if out else f"(SELECT NULL::BIGINT AS {ORD}, NULL::BIGINT AS key LIMIT 0)"


def exact_duplicates(ws: Workspace, keys: str, texts: Parts | None = None) -> Path:
    """Parquet (`_ord`, `dup_of`) of every exact duplicate among the rows of `keys` (SQL with `_ord`, `key`):
    dup_of = the smallest `_ord` with its key. With `texts` (keys that are hashes), every pair is confirmed
    on the normalised text, so a hash collision never drops a row."""
    out = ws.root / "exact.parquet"
    ws.con.execute(f"""
        CREATE OR REPLACE TABLE exact_pairs AS
        WITH k AS (SELECT {ORD}, key FROM {keys}),
             heads AS (SELECT key, min({ORD}) AS head FROM k GROUP BY key HAVING count(*) > 1)
        SELECT k.{ORD} AS {ORD}, h.head AS dup_of FROM k JOIN heads h ON k.key = h.key WHERE k.{ORD} <> h.head""")
    if texts is not None:
        pairs = [(b.column(0).to_numpy(), b.column(1).to_numpy()) for b in ws.batches(f"SELECT {ORD}, dup_of FROM exact_pairs")]
        bad = _not_equal(ws, texts, *(np.concatenate([p[k] for p in pairs] or [np.zeros(0, np.int64)]) for k in (0, 1)))
        if len(bad):
            ws.con.execute("DELETE FROM exact_pairs WHERE list_contains(?, _ord)", [bad.tolist()])
    ws.con.execute(f"COPY (SELECT * FROM exact_pairs ORDER BY {ORD}) TO {lit(out)} (FORMAT parquet)")
    ws.con.execute("DROP TABLE exact_pairs")
    return out


def _not_equal(ws: Workspace, texts: Parts, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """The rows i[p] whose normalised text differs from row j[p]'s, checked a chunk of pairs at a time (their
    texts gathered from the parts: at most an eighth of the memory limit)."""
    rows, nbytes = texts.size()
    step = max(1_000, ws.config.limit_bytes // 8 // max(1, 2 * nbytes // max(1, rows)))
    bad = [np.zeros(0, np.int64)]
    for s in range(0, len(i), step):
        ends = ng.unique(np.concatenate([i[s:s + step], j[s:s + step]]))
        got = [_read_part(f, texts.text, keep=ends[np.searchsorted(ends, lo):np.searchsorted(ends, hi, side="right")])
               for f, (lo, hi) in zip(texts.files, texts.ranges)]
        o = np.concatenate([g[0] for g in got])
        t = pa.concat_arrays([g[1] for g in got])
        a, b = pa.array(np.searchsorted(o, i[s:s + step])), pa.array(np.searchsorted(o, j[s:s + step]))
        bad.append(i[s:s + step][~same_normalized(t.take(a), t.take(b))])
    return np.concatenate(bad)


# ------------------------------------------------------------------------------------------ near


@dataclass(frozen=True)
class _NearJob:
    config: nd.NearDedupConfig
    bands: int
    rows: int

    @property
    def k(self) -> int:
        return self.bands * self.rows


def _pairs(ords: np.ndarray, dup_of: np.ndarray) -> pa.Table:
    return pa.table({ORD: pa.array(ords, pa.int64()), "dup_of": pa.array(dup_of, pa.int64())})


def near_whole(files: list[str], text: str, skip: list[np.ndarray], config: nd.NearDedupConfig, out: str) -> int:
    """near_dedup.near_duplicate_of over the rows of all `files` not in `skip`, as one array: (`_ord`,
    `dup_of`) pairs → `out`; the number of rows."""
    ords, texts = [], []
    for f, s in zip(files, skip):
        o, t = _read_part(f, text, drop=s)
        ords.append(o)
        texts.append(t)
    ords = np.concatenate(ords) if ords else np.zeros(0, np.int64)
    arr = texts[0] if len(texts) == 1 else pa.concat_arrays(texts) if texts else pa.array([], pa.large_string())
    del texts
    dup = nd.near_duplicate_of(arr, config)
    sel = np.flatnonzero(dup >= 0)
    pq.write_table(_pairs(ords[sel], ords[dup[sel]]), out)
    return len(ords)


def _signatures(texts: pa.Array, job: _NearJob) -> tuple[np.ndarray, np.ndarray]:
    """(signatures uint32 [n, k], nonempty bool [n]) of a part's texts (rensa, as near_duplicate_of)."""
    flat, offsets = nd.shingle_hashes(texts, job.config)
    sig = nd.export_signatures(flat, offsets, np.arange(len(texts)), job.k, job.config.seed & 0xFFFFFFFFFFFFFFFF,
                               job.config.export_rows)
    return sig, np.diff(offsets) > 0


def band_part(path: str, text: str, drop: np.ndarray, job: _NearJob, out: str) -> int:
    """Band keys (`_ord`, b0..b{B-1}; signed int64 bit patterns) of a part's rows with shingles; the rows read."""
    ords, texts = _read_part(path, text, drop=drop)
    sig, nonempty = _signatures(texts, job)
    keys = nd.band_keys(sig[nonempty], job.bands, job.rows, job.config.seed).view(np.int64)
    cols = {ORD: pa.array(ords[nonempty])} | {f"b{b}": pa.array(keys[:, b]) for b in range(job.bands)}
    pq.write_table(pa.table(cols), out)
    return len(ords)


def signature_part(path: str, text: str, keep: np.ndarray, job: _NearJob, out: str) -> int:
    """Signatures (`_ord`, `sig` as k*4 bytes) of the part's rows listed in `keep`."""
    ords, texts = _read_part(path, text, keep=keep)
    sig, _ = _signatures(texts, job)
    blob = pa.FixedSizeBinaryArray.from_buffers(pa.binary(4 * job.k), len(ords),
                                                [None, pa.py_buffer(np.ascontiguousarray(sig).tobytes())])
    pq.write_table(pa.table({ORD: pa.array(ords), "sig": blob}), out)
    return len(ords)


def _sig_matrix(col: pa.Array, k: int) -> np.ndarray:
    col = col.cast(pa.binary(4 * k)) if col.type != pa.binary(4 * k) else col
    return np.frombuffer(col.buffers()[1], np.uint32, count=len(col) * k, offset=col.offset * 4 * k).reshape(-1, k)


def near_duplicates(ws: Workspace, parts: Parts, drop: list[Path], config: nd.NearDedupConfig,
                    runner=None, on_part: Callable[[int], None] = lambda rows: None) -> Path:
    """Parquet (`_ord`, `dup_of`) of every near duplicate among the rows not listed in the files `drop`;
    `on_part` gets the rows of each part as it is done (all rows at once on one array)."""
    runner = runner or LocalRunner()
    skip = ws.skip(parts, drop)
    out = ws.root / "near.parquet"
    if not parts.files or memory.near_whole_bytes(*parts.size()) <= ws.config.near_whole_limit:
        for rows in runner.map(near_whole, [(parts.files, parts.text, skip, config, str(out))]):
            on_part(rows)
        return out
    bands, rows = nd.lsh_params(config.threshold, config.num_perm, config.fp_weight)
    job = _NearJob(config, bands, rows)
    band_dir, sig_dir = ws.dir("bands"), ws.dir("sigs")
    band_files = [str(band_dir / Path(f).name) for f in parts.files]
    for rows in runner.map(band_part, [(f, parts.text, s, job, o) for f, s, o in zip(parts.files, skip, band_files)]):
        on_part(rows)
    bands_sql = read(band_files)
    # candidate edges, band by band: head -> member and previous -> member within each bucket, by _ord
    ws.con.execute("CREATE OR REPLACE TABLE edges (i BIGINT, j BIGINT)")
    for b in range(bands):
        ws.con.execute(f"""
            INSERT INTO edges
            WITH m AS (SELECT {ORD} AS o, b{b} AS k FROM {bands_sql}
                       WHERE b{b} IN (SELECT b{b} FROM {bands_sql} GROUP BY b{b} HAVING count(*) > 1)),
                 w AS (SELECT o, min(o) OVER (PARTITION BY k) AS head,
                              lag(o) OVER (PARTITION BY k ORDER BY o) AS prev FROM m)
            SELECT head, o FROM w WHERE o <> head UNION ALL SELECT prev, o FROM w WHERE prev IS NOT NULL""")
    ws.con.execute("CREATE OR REPLACE TABLE cand AS SELECT DISTINCT i, j FROM edges")
    ws.con.execute("DROP TABLE edges")
    # signatures of the endpoints only, recomputed per part
    keep = ws.ords_by_part(parts, "(SELECT i AS _ord FROM cand UNION SELECT j FROM cand)")
    jobs = [(f, parts.text, k, job, str(sig_dir / Path(f).name)) for f, k in zip(parts.files, keep) if len(k)]
    list(runner.map(signature_part, jobs))
    verified_i, verified_j = [], []
    if jobs:
        sig_sql = read([j[-1] for j in jobs])
        ws.con.execute("CREATE OR REPLACE TABLE pairs (i BIGINT, j BIGINT, sure BOOLEAN)")
        for batch in ws.batches(f"""SELECT c.i, c.j, a.sig AS si, b.sig AS sj FROM cand c
                                    JOIN {sig_sql} a ON a.{ORD} = c.i JOIN {sig_sql} b ON b.{ORD} = c.j"""):
            est = (_sig_matrix(batch.column(2), job.k) == _sig_matrix(batch.column(3), job.k)).mean(axis=1)
            ok, unsure = nd.by_estimate(est, config, job.k)
            sel = ok | unsure
            if sel.any():
                pending = pa.table({"i": batch.column(0).filter(pa.array(sel)), "j": batch.column(1).filter(pa.array(sel)),
                                    "sure": pa.array(ok[sel])})
                ws.con.register("pending_batch", pending)
                ws.con.execute("INSERT INTO pairs SELECT * FROM pending_batch")
                ws.con.unregister("pending_batch")
        for batch in ws.batches(f"""SELECT p.i, p.j, p.sure, a.{parts.text} AS ta, b.{parts.text} AS tb FROM pairs p
                                    JOIN {parts.sql} a ON a.{ORD} = p.i JOIN {parts.sql} b ON b.{ORD} = p.j"""):
            i, j = batch.column(0).to_numpy(), batch.column(1).to_numpy()
            ok = batch.column(2).to_numpy(zero_copy_only=False).copy()
            ta, tb = ng.to_arrow(batch.column(3)), ng.to_arrow(batch.column(4))
            unsure = np.flatnonzero(~ok)
            if len(unsure):
                both = pa.concat_arrays([ta.take(pa.array(unsure)), tb.take(pa.array(unsure))])
                flat, off = nd.shingle_hashes(both, config)
                p = len(unsure)
                ok[unsure] = nd.exact_jaccard(flat, off, np.arange(p), np.arange(p) + p) >= config.threshold
            if config.numbers_must_match and ok.any():
                v = np.flatnonzero(ok)
                n = len(ta)
                ok[v] = nd.same_numbers(lambda x: (ta[x] if x < n else tb[x - n]).as_py(), v, v + n)
            verified_i.append(i[ok])
            verified_j.append(j[ok])
        ws.con.execute("DROP TABLE pairs")
    ws.con.execute("DROP TABLE cand")
    i = np.concatenate(verified_i) if verified_i else np.zeros(0, np.int64)
    j = np.concatenate(verified_j) if verified_j else np.zeros(0, np.int64)
    nodes = ng.unique(np.concatenate([i, j]))  # sorted: compact label order = _ord order
    label = nd.components(len(nodes), np.searchsorted(nodes, i), np.searchsorted(nodes, j))
    dup = label != np.arange(len(nodes))
    pq.write_table(_pairs(nodes[dup], nodes[label[dup]]), out)
    return out


# ------------------------------------------------------------------------------------------ decontamination


def scan_part(path: str, text: str, drop: np.ndarray | None, dec: Decontaminator, out: str) -> tuple[np.ndarray, int]:
    """(k-gram document frequencies, rows scanned) of a part's rows not in `drop`; the candidate rows'
    (`_ord`, text) → `out`, for the check once every part is scanned."""
    ords, texts = _read_part(path, text, drop=drop)
    df, cand = dec.scan(texts)
    pq.write_table(pa.table({ORD: pa.array(ords[cand]), "t": texts.take(pa.array(cand))}), out)
    return df, len(ords)


def contaminated(ws: Workspace, parts: Parts, drop: list[Path], benchmarks: dict[str, list[str]],
                 config: DecontamConfig, runner=None, on_part: Callable[[int], None] = lambda rows: None) -> Path:
    """Parquet (`_ord`, `benchmark`, `ngram`) of the contaminated rows among those not listed in `drop`;
    `on_part` gets the rows of each part as it is scanned."""
    runner = runner or LocalRunner()
    out = ws.root / "ngram-hits.parquet"
    dec = Decontaminator(benchmarks, config)
    df, rows = np.zeros(len(dec.bench_k), np.int64), 0
    cand_files = [str(ws.dir("candidates") / Path(f).name) for f in parts.files]
    scans = [(f, parts.text, s, dec, o) for f, s, o in zip(parts.files, ws.skip(parts, drop), cand_files)]
    for part_df, n in runner.map(scan_part, scans):
        df += part_df
        rows += n
        on_part(n)
    dec.finish(df, rows)
    schema = pa.schema([(ORD, pa.int64()), ("benchmark", pa.string()), ("ngram", pa.string())])
    with pq.ParquetWriter(out, schema) as w:
        for f in cand_files:
            for batch in pq.ParquetFile(f).iter_batches(65_536):
                hits = [(o, h) for o, h in zip(batch.column(0).to_pylist(), dec.check(batch.column(1))) if h]
                w.write_table(pa.table({ORD: pa.array([o for o, _ in hits], pa.int64()),
                                        "benchmark": pa.array([h[0] for _, h in hits], pa.string()),
                                        "ngram": pa.array([h[1] for _, h in hits], pa.string())}, schema=schema))
    return out

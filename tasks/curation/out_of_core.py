"""Out-of-core dedup and decontamination: the same rules as exact_dedup.py, near_dedup.py and
decontaminate.py, over Parquet parts on disk, with memory bounded by a setting instead of the input size.

Input: `Parts`, Parquet files of bounded size holding `_ord` (int64, the global order: earlier wins), a
text column and (for exact dedup) a key column. Work that reads text runs per part (`LocalRunner` in this
process, or `DaskRunner` on Dask workers: `part_runner`); everything that groups across parts is a DuckDB
query with `memory_limit` set, spilling to the run's directory.

1. exact dedup: rows with equal keys are duplicates of the row with the smallest `_ord`
       SELECT key, min(_ord) FROM rows GROUP BY key HAVING count(*) > 1
   then, when the key is a hash (`confirm=True`), every pair is confirmed on the normalised text.
2. near dedup, on the rows exact dedup kept: per part, MinHash signatures of the shingle sets and their
   LSH band keys (near_dedup.band_keys); per band, DuckDB groups the keys: in each bucket of ≥ 2 rows,
   by `_ord`, edges head → member and previous → member (near_dedup.band_edges' rule); the edges'
   endpoints get their signatures recomputed (per part, only those rows), the estimated Jaccard is
   checked, pairs within the margin get the exact Jaccard, verified pairs the numbers rule, and the
   connected components of what is left keep their smallest `_ord` (as near_duplicate_of).
3. decontamination, on the rows near dedup kept: per part, the rows' benchmark k-gram document
   frequencies and candidate rows (decontaminate.Decontaminator.scan); summed, they fix the training-side
   boilerplate; then the candidates' texts are checked (Decontaminator.check).

Memory: DuckDB gets half of `memory_limit`; Python work holds one part at a time (per worker), plus
arrays that grow with the rows dropped or flagged, not with all rows: the `_ord`s of earlier drops per
step (8 bytes each), the verified near-duplicate edges and their components (~40 bytes per near
duplicate), decontamination's candidate rows (8 bytes each). Measured in bench/curate.py.
"""
from __future__ import annotations

import logging
import re
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

from tasks.curation import ngrams as ng
from tasks.curation import near_dedup as nd
from tasks.curation.decontaminate import DecontamConfig, Decontaminator
from tasks.curation.exact_dedup import exact_keys, same_normalized

ORD = "_ord"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str) -> int:
    """Bytes in "4GB", "512MiB", "2.5 GB" or "1000000" (no unit: bytes). ValueError names the value."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (e.g. 4GB, 512MiB)")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()])


def lit(value: object) -> str:
    """A SQL string literal (quotes doubled), for paths and names inside queries."""
    return "'" + str(value).replace("'", "''") + "'"


def read(paths: list) -> str:
    """SQL reading the Parquet files `paths` as one table."""
    return "read_parquet([" + ", ".join(lit(p) for p in paths) + "])"


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
    memory_limit: str = "4GB"  # peak memory of the whole run, roughly: DuckDB half, one part per worker the rest
    batch_rows: int | None = None  # rows per part; None: from the limit (~4 KB of working memory per row in a
    #   part: text, token hashes, shingles, signatures), between 10K and 200K (200K parts already amortise
    #   DuckDB and worker start-up; bigger ones only raise the peak)
    work_dir: str | None = None  # where the run's directory of parts and spill files goes (removed afterwards);
    #   on a Dask cluster a path every worker can reach; None: the system's temporary directory
    threads: int = 2  # DuckDB threads and tokenisation threads per part; the machine has 2 cores
    batch_bytes: int | None = None  # bytes of row text per part; None: from the limit (part_bytes)

    @property
    def limit_bytes(self) -> int:
        return parse_size(self.memory_limit)

    @property
    def part_rows(self) -> int:
        if self.batch_rows:
            return self.batch_rows
        return int(min(200_000, max(10_000, self.limit_bytes // 2 // 4096)))

    @property
    def part_bytes(self) -> int:
        """A part is also cut at this much row text (a long chain of thought is ~100x a problem): 1/16 of
        the limit, so its Python rows (~2x the text) and Arrow copy stay well inside the half DuckDB leaves."""
        return self.batch_bytes or max(16 * 2**20, self.limit_bytes // 16)


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
            self.con.execute(f"SET memory_limit = '{config.limit_bytes // 2 // 2**20}MiB'")
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

    def column(self, sql: str) -> np.ndarray:
        out = [b.column(0).to_numpy() for b in self.batches(sql)]
        return np.concatenate(out) if out else np.zeros(0, np.int64)


@dataclass
class Parts:
    """Parquet parts of one table, in `_ord` order, with each part's (first, last) `_ord`."""

    files: list[str]
    ranges: list[tuple[int, int]]
    text: str = "text"
    key: str = "key"

    @property
    def sql(self) -> str:
        return read(self.files) if self.files else \
            f"(SELECT NULL::BIGINT AS {ORD}, NULL::VARCHAR AS {self.key}, NULL::VARCHAR AS {self.text} LIMIT 0)"


def write_parts(batches: Iterator[pa.Table], out: Path, text: str = "text", key: str = "key") -> Parts:
    """Write tables (each with an `_ord` column, ascending across tables) as numbered parts."""
    files, ranges = [], []
    for i, t in enumerate(batches):
        if t.num_rows == 0:
            continue
        path = out / f"part-{i:06d}.parquet"
        pq.write_table(t, path)
        o = t.column(ORD)
        files.append(str(path))
        ranges.append((int(o[0].as_py()), int(o[-1].as_py())))
    return Parts(files, ranges, text, key)


def parts_from_array(texts: pa.Array, ws: Workspace, keys: np.ndarray | None = None) -> Parts:
    """An in-memory text array (`_ord` = index) as parts (benches and tests)."""
    arr = ng.to_arrow(texts)
    n, step = len(arr), ws.config.part_rows

    def gen():
        for s in range(0, n, step):
            cols = {ORD: pa.array(np.arange(s, min(n, s + step), dtype=np.int64)), "text": arr.slice(s, step)}
            if keys is not None:
                cols["key"] = pa.array(keys[s: s + step])
            yield pa.table(cols)

    return write_parts(gen(), ws.dir("rows"))


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


class DaskError(RuntimeError):
    """No Dask cluster at the address given; the message says why."""


@contextmanager
def part_runner(dask: str | None, workers: int = 2, connect_timeout: str = "15s") -> Iterator[LocalRunner | DaskRunner]:
    """None: this process; "local": a LocalCluster of `workers` single-threaded worker processes (the
    signature work holds the GIL in rensa's export, so threads would not run in parallel); otherwise the
    address of an existing scheduler."""
    if dask is None:
        yield LocalRunner()
        return
    from distributed import Client, LocalCluster

    if dask == "local":
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                          silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
            yield DaskRunner(client)
        return
    from tasks.dask_client import connect

    try:
        client = connect(dask, timeout=connect_timeout)
    except Exception as exc:
        raise DaskError(f"--dask {dask}: cannot reach the scheduler ({exc})") from None
    with client:
        yield DaskRunner(client)


# ------------------------------------------------------------------------------------------ exact


def key_part(path: str, text: str, out: str) -> int:
    """The part with an exact-dedup `key` column (exact_keys: a hash of the normalised text) added."""
    t = pq.read_table(path)
    pq.write_table(t.append_column("key", pa.array(exact_keys(t.column(text)).view(np.int64))), out)
    return t.num_rows


def add_exact_keys(ws: Workspace, parts: Parts, runner=None) -> Parts:
    """For texts without a content id: parts with a hash key of the normalised text (confirm=True then)."""
    out = [str(ws.dir("keyed") / Path(f).name) for f in parts.files]
    list((runner or LocalRunner()).map(key_part, [(f, parts.text, o) for f, o in zip(parts.files, out)]))
    return Parts(out, parts.ranges, parts.text, "key")


def exact_duplicates(ws: Workspace, parts: Parts, *, confirm: bool) -> Path:
    """Parquet (`_ord`, `dup_of`) of every exact duplicate (dup_of = smallest `_ord` with its key)."""
    out = ws.root / "exact.parquet"
    ws.con.execute(f"""
        CREATE OR REPLACE TABLE exact_pairs AS
        WITH heads AS (SELECT {parts.key} AS k, min({ORD}) AS head FROM {parts.sql}
                       GROUP BY {parts.key} HAVING count(*) > 1)
        SELECT r.{ORD} AS {ORD}, h.head AS dup_of FROM {parts.sql} r JOIN heads h ON r.{parts.key} = h.k
        WHERE r.{ORD} <> h.head""")
    if confirm:  # hash keys: equal keys must mean equal normalised text (a collision never drops a row)
        wrong = []
        for b in ws.batches(f"""SELECT p.{ORD}, a.{parts.text} AS ta, b.{parts.text} AS tb FROM exact_pairs p
                                JOIN {parts.sql} a ON a.{ORD} = p.{ORD} JOIN {parts.sql} b ON b.{ORD} = p.dup_of"""):
            ok = same_normalized(b.column(1), b.column(2))
            wrong.append(b.column(0).to_numpy()[~ok])
        bad = np.concatenate(wrong) if wrong else np.zeros(0, np.int64)
        if len(bad):
            ws.con.execute("DELETE FROM exact_pairs WHERE list_contains(?, _ord)", [bad.tolist()])
    ws.con.execute(f"COPY (SELECT * FROM exact_pairs ORDER BY {ORD}) TO {lit(out)} (FORMAT parquet)")
    ws.con.execute("DROP TABLE exact_pairs")
    return out


# ------------------------------------------------------------------------------------------ near


@dataclass(frozen=True)
class _NearJob:
    config: nd.NearDedupConfig
    bands: int
    rows: int

    @property
    def k(self) -> int:
        return self.bands * self.rows


def _read_part(path: str, text: str, keep: np.ndarray | None = None, drop: np.ndarray | None = None):
    t = pq.read_table(path, columns=[ORD, text])
    ords = t.column(ORD).to_numpy()
    mask = np.ones(len(ords), bool)
    if drop is not None and len(drop):
        mask &= ~np.isin(ords, drop)
    if keep is not None:
        mask &= np.isin(ords, keep)
    idx = np.flatnonzero(mask)
    return ords[idx], ng.to_arrow(t.column(text)).take(pa.array(idx))


def _signatures(texts: pa.Array, job: _NearJob) -> tuple[np.ndarray, np.ndarray]:
    """(signatures uint32 [n, k], nonempty bool [n]) of a part's texts (rensa, as near_duplicate_of)."""
    flat, offsets = nd.shingle_hashes(texts, job.config)
    sig = nd.export_signatures(flat, offsets, np.arange(len(texts)), job.k, job.config.seed & 0xFFFFFFFFFFFFFFFF,
                               job.config.export_rows)
    return sig, np.diff(offsets) > 0


def band_part(path: str, text: str, drop: np.ndarray, job: _NearJob, out: str) -> int:
    """Band keys (`_ord`, b0..b{B-1}; signed int64 bit patterns) of a part's rows with shingles."""
    ords, texts = _read_part(path, text, drop=drop)
    sig, nonempty = _signatures(texts, job)
    keys = nd.band_keys(sig[nonempty], job.bands, job.rows, job.config.seed).view(np.int64)
    cols = {ORD: pa.array(ords[nonempty])} | {f"b{b}": pa.array(keys[:, b]) for b in range(job.bands)}
    pq.write_table(pa.table(cols), out)
    return int(nonempty.sum())


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


def near_duplicates(ws: Workspace, parts: Parts, drop: Path | None, config: nd.NearDedupConfig,
                    runner=None) -> Path:
    """Parquet (`_ord`, `dup_of`) of every near duplicate among the rows not listed in `drop`."""
    runner = runner or LocalRunner()
    bands, rows = nd.lsh_params(config.threshold, config.num_perm, config.fp_weight)
    job = _NearJob(config, bands, rows)
    skip = ws.ords_by_part(parts, read([drop])) if drop else [None] * len(parts.files)
    band_dir, sig_dir = ws.dir("bands"), ws.dir("sigs")
    band_files = [str(band_dir / Path(f).name) for f in parts.files]
    list(runner.map(band_part, [(f, parts.text, s, job, o) for f, s, o in zip(parts.files, skip, band_files)]))
    out = ws.root / "near.parquet"
    if not band_files:
        pq.write_table(pa.table({ORD: pa.array([], pa.int64()), "dup_of": pa.array([], pa.int64())}), out)
        return out
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
    pq.write_table(pa.table({ORD: pa.array(nodes[dup]), "dup_of": pa.array(nodes[label[dup]])}), out)
    return out


# ------------------------------------------------------------------------------------------ decontamination


def scan_part(path: str, text: str, drop: np.ndarray | None, dec: Decontaminator) -> tuple[np.ndarray, np.ndarray, int]:
    """(k-gram document frequencies, candidate `_ord`s, rows scanned) of a part's rows not in `drop`."""
    ords, texts = _read_part(path, text, drop=drop)
    df, cand = dec.scan(texts)
    return df, ords[cand], len(ords)


def contaminated(ws: Workspace, parts: Parts, drop: list[Path], benchmarks: dict[str, list[str]],
                 config: DecontamConfig, runner=None) -> Path:
    """Parquet (`_ord`, `benchmark`, `ngram`) of the contaminated rows among those not listed in `drop`."""
    runner = runner or LocalRunner()
    out = ws.root / "contaminated.parquet"
    skip = ws.ords_by_part(parts, read(drop)) if drop else [None] * len(parts.files)
    dec = Decontaminator(benchmarks, config)
    df, cands, rows = np.zeros(len(dec.bench_k), np.int64), [], 0
    for part_df, part_cand, n in runner.map(scan_part, [(f, parts.text, s, dec) for f, s in zip(parts.files, skip)]):
        df += part_df
        cands.append(part_cand)
        rows += n
    dec.finish(df, rows)
    cand = np.sort(np.concatenate(cands)) if cands else np.zeros(0, np.int64)
    schema = pa.schema([(ORD, pa.int64()), ("benchmark", pa.string()), ("ngram", pa.string())])
    with pq.ParquetWriter(out, schema) as w:
        if len(cand):
            ws.con.register("cand_ords", pa.table({ORD: pa.array(cand)}))
            ws.con.execute(f"CREATE OR REPLACE TABLE cand_text AS SELECT r.{ORD}, r.{parts.text} AS t FROM {parts.sql} r "
                           f"JOIN cand_ords c ON c.{ORD} = r.{ORD}")
            ws.con.unregister("cand_ords")
            for batch in ws.batches(f"SELECT {ORD}, t FROM cand_text ORDER BY {ORD}"):
                hits = [(o, h) for o, h in zip(batch.column(0).to_pylist(), dec.check(batch.column(1))) if h]
                w.write_table(pa.table({ORD: pa.array([o for o, _ in hits], pa.int64()),
                                        "benchmark": pa.array([h[0] for _, h in hits], pa.string()),
                                        "ngram": pa.array([h[1] for _, h in hits], pa.string())}, schema=schema))
            ws.con.execute("DROP TABLE cand_text")
    return out

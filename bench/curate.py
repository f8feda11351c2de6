"""bench/curate: dedup + decontamination throughput and peak memory, ours vs a plain datasketch implementation.

    python bench/curate.py [--rows 1000000] [--workers 2] [--seed 0] [--bench-problems 1000]
                           [--memory-limit SIZE] [--dask local|ADDRESS] [--only ours,kernels,datasketch]

Generates a seeded synthetic corpus of math-like problems (30-80 words, Zipf vocabulary, numbers and
equations as tokens, a fixed instruction sentence in 30% of the rows and in every benchmark problem) with
planted rows:
  - exact duplicates (5%): an earlier row with changed case and spacing;
  - near duplicates (5%): an earlier row with a 1-3 word lead-in or tail ("Problem 7:", "Show your work.");
  - contaminated rows (0.1%): a different lead-in followed by a whole benchmark problem, or a 20-word span;
  - short-phrase rows (0.1%): a row with 5-7 consecutive words of a benchmark problem (must be kept).
The parent writes the corpus once, block by block (1M rows a block, each planted as above, with the same
vocabulary and benchmark), so it never holds a big corpus: Parquet parts for `ours`, Arrow IPC in a temp
dir for the in-memory implementations. Each implementation runs in its own child:
  ours:       what `klear curate` runs (tasks/curation/out_of_core.py, as steps.py calls it): exact keys per
              part and DuckDB grouping, near dedup (one array when it fits the memory limit, else across
              parts), decontamination per part; within `--memory-limit`, or by default the limit `klear
              curate` chooses (tasks/curation/memory.py); `--dask` runs the per-part work on Dask
  kernels:    the same rules' in-memory kernels on one array (exact_duplicate_of -> near_duplicate_of ->
              find_contamination), each on the rows the previous one kept, `--workers` threads
  datasketch: dict of NFKC+casefold+whitespace-collapsed text -> MinHashLSH(threshold 0.8, 128 perms,
              shared permutations), query then insert per row -> Python set of benchmark word 9-grams
and prints rows/s (all rows in / time of the three steps), peak RSS (max over steps, /proc VmHWM) and RSS
once the corpus is loaded, recall on planted rows (exact duplicates, near duplicates, contamination among
rows that reach that step), rows flagged that were not planted, whether ours keeps the kernels' rows, and
the ratio ours/datasketch overall and per step. `--rows 20000` is the smoke test; `--only ours` skips the
others. Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

INSTR = "Give the final answer in \\boxed{}."
LEADS = ["Problem:", "Problem 7:", "Question.", "Exercise 3.", "Solve:", "Warm-up:", "Q:", "Task 12."]
TAILS = ["Show your work.", "(5 points)", "Explain.", "Justify your answer.", "Be careful."]
KINDS = ("base", "exact", "near", "contam", "phrase")


def _rss_mb(field: str = "VmHWM") -> float:
    """Peak (VmHWM) or current (VmRSS) resident set of this process in MB. Not ru_maxrss: Linux carries
    it over from the parent across fork + exec, so a child would report the corpus generator's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _vocab(rng: np.random.Generator, size: int = 30_000) -> pa.Array:
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    lens = rng.integers(2, 11, size)
    chars = letters[rng.integers(0, 26, int(lens.sum()))]
    off = np.zeros(size + 1, np.int32)
    np.cumsum(lens, out=off[1:])
    words = pa.StringArray.from_buffers(size, pa.py_buffer(off.tobytes()), pa.py_buffer(chars.tobytes()))
    nums = [str(v) for v in rng.integers(0, 1000, 1500)]
    eqs = [f"{a}x+{b}={c}" for a, b, c in rng.integers(1, 20, (500, 3))]
    return pa.concat_arrays([words.cast(pa.large_string()), pa.array(nums + eqs, pa.large_string())])


def _docs(rng: np.random.Generator, vocab: pa.Array, n: int, block: int = 100_000) -> pa.Array:
    """n random problems of 30-80 words, word ranks drawn with density ~ 1/(rank + 50) (inverse CDF)."""
    span = np.log((len(vocab) + 50.0) / 50.0)
    perm = rng.permutation(len(vocab))  # which vocab entry gets which rank
    out = []
    for s in range(0, n, block):
        m = min(block, n - s)
        lens = rng.integers(30, 81, m)
        ranks = (50.0 * np.exp(rng.random(int(lens.sum())) * span) - 50.0).astype(np.int64)
        ids = perm[np.minimum(ranks, len(vocab) - 1)]
        off = np.zeros(m + 1, np.int32)
        np.cumsum(lens, out=off[1:])
        words = pa.ListArray.from_arrays(pa.array(off), vocab.take(pa.array(ids)))
        out.append(pc.binary_join(words, pa.scalar(" ", pa.large_string())))
    return pa.concat_arrays(out).cast(pa.large_string()) if out else pa.array([], pa.large_string())


def make_corpus(rows: int, seed: int = 0, bench_problems: int = 1000, block: int = 0):
    """(texts: pa.LargeStringArray, benchmark: list[str], kind: int8 [rows] (index into KINDS),
    src: int64 [rows] (source row of a planted exact/near duplicate, else -1))."""
    rng = np.random.default_rng(seed)
    vocab = _vocab(rng)
    bench = [f"{t} {INSTR}" for t in _docs(rng, vocab, bench_problems).to_pylist()]
    if block:  # a later block of a big corpus: same vocabulary and benchmark, other rows and plants
        rng = np.random.default_rng([seed, 1000 + block])
    base = _docs(rng, vocab, rows)
    instr = rng.random(rows) < 0.3
    sep = pa.scalar(" ", pa.large_string())
    with_instr = pc.binary_join_element_wise(base, pa.scalar(INSTR, pa.large_string()), sep)
    base = pc.if_else(pa.array(instr), with_instr, base)

    kind = np.zeros(rows, np.int8)
    src = np.full(rows, -1, np.int64)
    planted = rng.permutation(np.arange(rows // 20, rows))  # targets come after some base rows exist
    counts = [int(rows * f) for f in (0.05, 0.05, 0.001, 0.001)]
    at = 0
    for k, c in enumerate(counts, start=1):
        kind[planted[at : at + c]] = k
        at += c
    targets = np.flatnonzero(kind)
    pool = np.flatnonzero(kind == 0)
    src_pool = pool[(rng.random(len(targets)) * np.searchsorted(pool, targets)).astype(np.int64)]  # a base row before
    src[targets] = src_pool
    own = kind[targets] >= 3  # contaminated / short-phrase rows are built from their own base text
    src_text = base.take(pa.array(np.where(own, targets, src_pool))).to_pylist()
    src[targets[own]] = -1
    new, n_contam, r = [], 0, np.random.default_rng([seed, 1] + ([block] if block else []))
    for t, k, s_text in zip(targets.tolist(), kind[targets].tolist(), src_text):
        if k == 1:  # exact: case and spacing
            words = [w.upper() if r.random() < 0.3 else w for w in s_text.split(" ")]
            new.append("  " + "   ".join(words) + " \t")
        elif k == 2:  # near: short lead-in or tail
            if r.random() < 0.5:
                new.append(f"{LEADS[r.integers(len(LEADS))]} {s_text}")
            else:
                new.append(f"{s_text} {TAILS[r.integers(len(TAILS))]}")
        elif k == 3:  # contaminated: different lead-in + benchmark problem (or a 20-word span of it)
            b, n_contam = n_contam % len(bench), n_contam + 1  # distinct problems: no near duplicates among them
            words = bench[b].split(" ")
            lead = " ".join(s_text.split(" ")[: int(r.integers(2, 7))])
            body = bench[b] if r.random() < 0.5 else " ".join(words[(i := int(r.integers(0, 10))) : i + 20])
            new.append(f"{lead} {body}")
        else:  # shared short phrase: 5-7 words of a benchmark problem inside an unrelated row
            b = int(r.integers(len(bench)))
            words, sw = bench[b].split(" "), s_text.split(" ")
            i, L = int(r.integers(0, 20)), int(r.integers(5, 8))
            while len(re.findall(r"\w+", " ".join(words[i : i + L]))) > 7:  # "3x+5=11" is 3 word tokens
                L -= 1
            new.append(" ".join(sw[:10] + words[i : i + L] + sw[10:]))
    mask = np.zeros(rows, bool)
    mask[targets] = True
    texts = pc.replace_with_mask(base, pa.array(mask), pa.array(new, pa.large_string())) if len(new) else base
    return texts, bench, kind, src


# ---------------------------------------------------------------- ours


class Steps:
    """Wall time and peak RSS per step. Between steps, pyarrow's pool returns freed memory to the OS, so
    one step's cached allocations do not count against the next; VmHWM is reset at each step start."""

    def __init__(self):
        self.times: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.peaks: dict[str, float] = {}

    def run(self, name: str, fn, *args):
        pa.default_memory_pool().release_unused()
        try:
            Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS watermark (Linux)
        except OSError:
            pass
        t, c = time.perf_counter(), time.process_time()
        out = fn(*args)
        self.times[name] = time.perf_counter() - t
        self.cpu[name] = time.process_time() - c  # all threads: robust to a busy machine, unlike wall time
        self.peaks[name] = _rss_mb()
        return out


def run_kernels(texts: pa.Array, bench: list[str], workers: int):
    from tasks.curation.decontaminate import DecontamConfig, find_contamination
    from tasks.curation.near_dedup import NearDedupConfig, near_duplicate_of

    from tasks.curation.exact_dedup import exact_duplicate_of

    st = Steps()
    dup = st.run("exact", lambda: exact_duplicate_of(texts, workers=workers))
    keep1 = np.flatnonzero(dup < 0)
    near = st.run("near", lambda: near_duplicate_of(texts.take(pa.array(keep1)), NearDedupConfig(workers=workers)))
    keep2 = keep1[near < 0]
    near_full = np.full(len(texts), -1, np.int64)
    near_full[keep1[near >= 0]] = keep1[near[near >= 0]]
    hits = st.run("decontam", lambda: find_contamination(texts.take(pa.array(keep2)), {"synth": bench},
                                                         DecontamConfig(workers=workers)))
    contam = np.zeros(len(texts), bool)
    contam[keep2[[h is not None for h in hits]]] = True
    extra = {**{f"peak_{k}": v for k, v in st.peaks.items()}, **{f"cpu_{k}": v for k, v in st.cpu.items()}}
    return dup, near_full, contam, st.times, extra


# ---------------------------------------------------------------- ours: over parts, within the memory limit


def run_ours(data: Path, workers: int, limit: int, dask: str | None):
    """Keys, exact, near, decontam over the Parquet parts the parent wrote, as the pipeline runs them."""
    from tasks.curation import out_of_core as oc
    from tasks.curation.decontaminate import DecontamConfig
    from tasks.curation.near_dedup import NearDedupConfig

    meta = json.loads((data / "parts.json").read_text())
    bench = json.loads((data / "bench.json").read_text())
    cfg = oc.OutOfCoreConfig(memory_limit=limit, threads=workers)
    st = Steps()
    with oc.part_runner(dask, workers) as runner, oc.Workspace(cfg) as ws:
        parts = oc.Parts(meta["files"], [tuple(r) for r in meta["ranges"]])
        keys = st.run("keys", oc.add_exact_keys, ws, parts, runner)
        exact = st.run("exact", lambda: oc.exact_duplicates(ws, keys, texts=parts))
        near = st.run("near", lambda: oc.near_duplicates(ws, parts, [exact], NearDedupConfig(workers=workers), runner))
        contam = st.run("decontam", lambda: oc.contaminated(ws, parts, [exact, near], {"synth": bench},
                                                            DecontamConfig(workers=workers), runner))
        rows = meta["rows"]
        dup, near_arr = (np.full(rows, -1, np.int64) for _ in range(2))
        for arr, path in ((dup, exact), (near_arr, near)):
            t = pq.read_table(path)
            arr[t.column("_ord").to_numpy()] = t.column("dup_of").to_numpy()
        contam_arr = np.zeros(rows, bool)
        contam_arr[pq.read_table(contam).column("_ord").to_numpy()] = True
    times = {"exact": st.times["keys"] + st.times["exact"], "near": st.times["near"], "decontam": st.times["decontam"]}
    extra = {**{f"peak_{k}": v for k, v in st.peaks.items()},
             **{f"cpu_{k}": v for k, v in st.cpu.items()}}
    return dup, near_arr, contam_arr, times, extra


# ---------------------------------------------------------------- datasketch baseline


def run_datasketch(texts: list[str], bench: list[str]):
    from datasketch import MinHash, MinHashLSH

    def exact():
        seen: dict[str, int] = {}
        dup = np.full(len(texts), -1, np.int64)
        for i, s in enumerate(texts):
            j = seen.setdefault(" ".join(unicodedata.normalize("NFKC", s).casefold().split()), i)
            if j != i:
                dup[i] = j
        return dup

    def near_step(rows):
        lsh = MinHashLSH(threshold=0.8, num_perm=128)
        template = MinHash(num_perm=128, seed=0)  # permutations shared by every row (else rebuilt per object)
        near = np.full(len(texts), -1, np.int64)
        for i in rows.tolist():
            words = unicodedata.normalize("NFKC", texts[i]).lower().split()
            sh = {" ".join(words[k : k + 5]) for k in range(max(len(words) - 4, 1))}
            m = MinHash(num_perm=128, seed=0, permutations=template.permutations, scheme=template.scheme)
            m.update_batch([x.encode() for x in sh])
            cands = lsh.query(m)
            if cands:
                near[i] = min(cands)
            else:
                lsh.insert(i, m)
        return near

    def decontam(rows):
        word = re.compile(r"\w+")
        grams = set()
        for b in bench:
            w = word.findall(unicodedata.normalize("NFKC", b).lower())
            grams.update(tuple(w[k : k + 9]) for k in range(len(w) - 8))
        contam = np.zeros(len(texts), bool)
        for i in rows.tolist():
            w = word.findall(unicodedata.normalize("NFKC", texts[i]).lower())
            contam[i] = any(tuple(w[k : k + 9]) in grams for k in range(len(w) - 8))
        return contam

    st = Steps()
    dup = st.run("exact", exact)
    near = st.run("near", near_step, np.flatnonzero(dup < 0))
    contam = st.run("decontam", decontam, np.flatnonzero((dup < 0) & (near < 0)))
    return dup, near, contam, st.times, {**{f"peak_{k}": v for k, v in st.peaks.items()},
                                         **{f"cpu_{k}": v for k, v in st.cpu.items()}}


# ---------------------------------------------------------------- driver


BLOCK_ROWS = 1_000_000  # corpus generated (and planted) block by block beyond this many rows


def save_corpus(out: Path, rows: int, seed: int, bench_problems: int, impls: list[str], part_rows: int) -> None:
    """Arrow IPC of all texts (for the in-memory implementations, rows <= BLOCK_ROWS) and/or Parquet parts
    (for ours), written block by block so the parent never holds a big corpus."""
    from tasks.curation import out_of_core as oc

    kinds, srcs, files, ranges = [], [], [], []
    (out / "parts").mkdir()
    for block, start in enumerate(range(0, rows, BLOCK_ROWS)):
        n = min(BLOCK_ROWS, rows - start)
        texts, bench, kind, src = make_corpus(n, seed, bench_problems, block)
        kinds.append(kind)
        srcs.append(np.where(src >= 0, src + start, -1))
        if set(impls) & {"kernels", "datasketch"}:
            assert rows <= BLOCK_ROWS, "the in-memory implementations run up to 1M rows here"
            with pa.OSFile(str(out / "texts.arrow"), "wb") as f, pa.ipc.new_file(f, pa.schema([("t", pa.large_string())])) as w:
                w.write_table(pa.table({"t": texts}))
        if "ours" in impls:
            for s in range(0, n, part_rows):
                m = min(part_rows, n - s)
                path = out / "parts" / f"part-{len(files):06d}.parquet"
                oc.write_part(pa.table({"_ord": pa.array(np.arange(start + s, start + s + m, dtype=np.int64)),
                                        "text": texts.slice(s, m)}), str(path))  # as ingest writes a part
                files.append(str(path))
                ranges.append((start + s, start + s + m - 1))
        del texts
    (out / "bench.json").write_text(json.dumps(bench))
    (out / "parts.json").write_text(json.dumps({"files": files, "ranges": ranges, "rows": rows}))
    np.save(out / "kind.npy", np.concatenate(kinds))
    np.save(out / "src.npy", np.concatenate(srcs))


def load_corpus(data: Path):
    texts = pa.ipc.open_file(pa.memory_map(str(data / "texts.arrow"))).read_all().column("t")  # zero copy
    texts = texts.chunk(0) if texts.num_chunks == 1 else texts.combine_chunks()
    return texts, json.loads((data / "bench.json").read_text()), np.load(data / "kind.npy"), np.load(data / "src.npy")


def child(impl: str, data: Path, workers: int, limit: int, dask: str | None) -> dict:
    if impl == "ours":
        kind = np.load(data / "kind.npy")
        rows, rss_data = len(kind), _rss_mb("VmRSS")
        dup, near, contam, times, extra = run_ours(data, workers, limit, dask)
    else:
        texts, bench, kind, src = load_corpus(data)
        rows = len(texts)
        if impl == "datasketch":
            texts = texts.to_pylist()
        rss_data = _rss_mb("VmRSS")
        run = run_kernels if impl == "kernels" else run_datasketch
        dup, near, contam, times, extra = run(texts, bench, workers) if impl == "kernels" else run(texts, bench)
    np.save(data / f"{impl}_kept.npy", np.flatnonzero((dup < 0) & (near < 0) & ~contam))
    total = sum(times.values())
    planted_near = kind == 2
    reach = (dup < 0) & (near < 0)  # rows that reach decontamination
    planted_contam = (kind == 3) & reach
    return {
        "impl": impl,
        "rows": rows,
        "seconds": total,
        "rows_per_s": rows / total,
        **{f"t_{k}": v for k, v in times.items()},
        "peak_rss_mb": max(v for k, v in extra.items() if k in ("peak_keys", "peak_exact", "peak_near", "peak_decontam")),
        "data_rss_mb": rss_data,
        "exact_recall": float((dup[kind == 1] >= 0).mean()) if (kind == 1).any() else float("nan"),
        "near_recall": float(((near >= 0) | (dup >= 0))[planted_near].mean()) if planted_near.any() else float("nan"),
        "near_false": int(((near >= 0) & (kind != 2)).sum()),
        "contam_recall": float(contam[planted_contam].mean()) if planted_contam.any() else float("nan"),
        "contam_false": int((contam & (kind != 3)).sum()),
        **extra,
    }


IMPLS = ("ours", "kernels", "datasketch")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bench-problems", type=int, default=1000)
    ap.add_argument("--only", help=f"comma-separated implementations to run: {', '.join(IMPLS)} "
                    "(default: all three up to 1M rows, ours alone beyond)")
    ap.add_argument("--memory-limit", help="ours: its memory limit (default: chosen as `klear curate` does)")
    ap.add_argument("--dask", help="ours: per-part work on 'local' (a LocalCluster of --workers) or a scheduler address")
    ap.add_argument("--child", choices=IMPLS, help=argparse.SUPPRESS)
    ap.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.data, a.workers, int(a.memory_limit), a.dask)))
        return 0
    from tasks.curation import memory

    choice = memory.choose_memory_limit(a.memory_limit)
    impls = a.only.split(",") if a.only else (list(IMPLS) if a.rows <= BLOCK_ROWS else ["ours"])
    results, same_kept = {}, None
    with tempfile.TemporaryDirectory(prefix="bench-curate-") as tmp:
        t = time.perf_counter()
        save_corpus(Path(tmp), a.rows, a.seed, a.bench_problems, impls, memory.part_rows(choice.limit))
        print(f"corpus: {a.rows} rows generated in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        for impl in impls:
            cmd = [sys.executable, __file__, "--child", impl, "--data", tmp, "--workers", str(a.workers),
                   "--memory-limit", str(choice.limit)] + (["--dask", a.dask] if a.dask else [])
            proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            if proc.returncode != 0:
                sys.stderr.write(proc.stderr)
                return proc.returncode
            results[impl] = json.loads(proc.stdout.strip().splitlines()[-1])
        if {"ours", "kernels"} <= set(impls):
            same_kept = np.array_equal(np.load(Path(tmp) / "ours_kept.npy"), np.load(Path(tmp) / "kernels_kept.npy"))
    cols = ["rows_per_s", "seconds", "t_exact", "t_near", "t_decontam", "peak_rss_mb", "data_rss_mb",
            "exact_recall", "near_recall", "near_false", "contam_recall", "contam_false"]
    print(f"{a.rows} rows, {a.workers} workers, seed {a.seed}, {a.bench_problems} benchmark problems, "
          f"ours: {choice.line()}" + (f" on Dask {a.dask}" if a.dask else ""))
    print(f"{'':>12}" + "".join(f"{c:>14}" for c in cols))
    for impl, r in results.items():
        print(f"{impl:>12}" + "".join(f"{r[c]:>14.3f}" if isinstance(r[c], float) else f"{r[c]:>14}" for c in cols))
    for impl, r in results.items():
        print(f"{impl:>10}: peak RSS MB per step: " + ", ".join(
            f"{k[5:]} {v:.0f}" for k, v in r.items() if k.startswith("peak_") and k != "peak_rss_mb")
              + "; CPU s per step: " + ", ".join(f"{k[4:]} {v:.1f}" for k, v in r.items() if k.startswith("cpu_")))
    if "ours" in results:
        print(f"ours: peak RSS over the whole run {results['ours']['peak_rss_mb']:.0f} MB (limit "
              f"{choice.limit / 2**30:.1f} GiB)" + ("" if same_kept is None else f"; same kept rows as the kernels: {same_kept}"))
    if {"ours", "datasketch"} <= set(results):
        o, d = results["ours"], results["datasketch"]
        print(f"ours/datasketch: throughput x{o['rows_per_s'] / d['rows_per_s']:.1f}, "
              f"peak RSS x{o['peak_rss_mb'] / d['peak_rss_mb']:.2f}; per step: "
              + ", ".join(f"{k} x{d['t_' + k] / o['t_' + k]:.1f}" for k in ("exact", "near", "decontam")))
        steps = ("exact", "near", "decontam")
        cpu_ratio = sum(d["cpu_" + k] for k in steps) / sum(o["cpu_" + k] for k in steps)
        print(f"CPU time (all threads) ours/datasketch: x{cpu_ratio:.1f} less CPU; "
              + ", ".join(f"{k} x{d['cpu_' + k] / o['cpu_' + k]:.1f}" for k in steps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

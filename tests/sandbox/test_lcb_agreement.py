"""Acceptance: our judge agrees with LiveCodeBench's run_test, test by test, on tests/sandbox/data/lcb_corpus.jsonl.

The corpus' `lcb` fields are LCB's recorded verdicts (bench/lcb_agreement.py says how to recompute them
from a LiveCodeBench checkout). Every disagreement fails the test unless its row is listed in
KNOWN_DIFFERENCES with the reason we deliberately judge otherwise; a listed row that agrees again fails
too, so the list never goes stale.
"""

import pytest

from tests.benches import load_bench


# row id -> why our judge deliberately differs from LiveCodeBench on it
KNOWN_DIFFERENCES: dict[str, str] = {}


la = load_bench("lcb_agreement")


def test_corpus_is_well_formed():
    from sandbox.testcases import parse_test_suite

    corpus = la.load_corpus()
    ids = [row["id"] for row in corpus]
    assert len(ids) == len(set(ids))
    for row in corpus:
        assert row["kind"] in ("honest", "wrong"), row["id"]
        suite = parse_test_suite(row["tests"])
        assert len(suite) == la.n_tests(row), row["id"]
        assert len(row["lcb"]["passed"]) == len(suite), row["id"]
        assert row["lcb"]["all"] == all(row["lcb"]["passed"]), row["id"]
        if row["kind"] == "wrong":
            assert not row["lcb"]["all"], f"{row['id']}: a wrong program that LCB accepts"
    assert set(KNOWN_DIFFERENCES) <= set(ids)


@pytest.mark.docker
@pytest.mark.slow
def test_judge_agrees_with_livecodebench(docker_client):
    from sandbox import PoolConfig, SandboxPool

    corpus = la.load_corpus()
    with SandboxPool(PoolConfig(size=2), client=docker_client) as pool:
        found = la.disagreements(corpus, pool)
    unexpected = [d.line() for d in found if d.id not in KNOWN_DIFFERENCES]
    if unexpected:
        pytest.fail(f"{len(unexpected)} rows disagree with LiveCodeBench (P pass, F fail per test):\n"
                    + "\n".join(unexpected), pytrace=False)
    stale = sorted(set(KNOWN_DIFFERENCES) - {d.id for d in found})
    assert not stale, f"listed in KNOWN_DIFFERENCES but agreeing now: {stale}"

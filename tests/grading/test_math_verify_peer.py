"""math-verify's own test cases through our reward path (bench/math_verify_agreement.py): every case where
we differ from their expected value is one we examined (docs/training.md, "Math rewards"); none is unexplained."""
import pytest

from tests.benches import load_bench

peer = load_bench("math_verify_agreement")


@pytest.mark.slow
def test_no_unexplained_disagreement_with_math_verify_tests(tmp_path):
    try:
        sdist = peer.download_sdist(tmp_path)
    except (RuntimeError, OSError) as e:
        pytest.skip(f"math-verify {peer.VERSION} sdist not downloadable here ({e})")
    r = peer.run(sdist)
    assert r["total"] > 200 and r["theirs_agree"] == r["total"]  # the tables were read, as they run them
    assert [(c.category, c.file, c.test, c.gold, c.pred) for c in r["unexplained"]] == []
    assert r["ours_agree"] == r["total"] - sum(r["disagreements"].values())

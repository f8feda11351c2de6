import numpy as np

from tasks.curation.exact_dedup import exact_duplicate_of
from tasks.curation.textnorm import normalize_text


def test_case_and_spacing_variants_point_at_first():
    texts = ["Compute  2+2.", "other", "compute 2+2. ", "COMPUTE\t2+2.", "２+2"]
    assert exact_duplicate_of(texts).tolist() == [-1, -1, 0, 0, -1]


def test_empty_input():
    assert exact_duplicate_of([]).tolist() == []


def test_vectorised_dedup_agrees_with_python_normalisation():
    texts = ["  A  b\tc\n", "Straße", "ＡＢＣ  x", "ﬁne", "Ὀδυσσεύς", "a\u2003b", "", "x\u00a0y",
             "a b c", "STRASSE", "abc x", "fine", "ὀδυσσεύς", "A B", " ", "X Y"]
    norm = [normalize_text(t) for t in texts]
    expected = [next((j for j in range(i) if norm[j] == norm[i]), -1) for i in range(len(texts))]
    assert exact_duplicate_of(texts).tolist() == expected


def test_large_group_linear():
    texts = ["same text"] * 5000 + ["different"]
    dup = exact_duplicate_of(texts)
    assert (dup[1:5000] == 0).all() and dup[0] == -1 and dup[-1] == -1
    assert dup.dtype == np.int64

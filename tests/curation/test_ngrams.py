"""Tokenisation and n-gram hashing (tasks/curation/ngrams.py): one hostile behaviour per test."""
import re
import unicodedata

import numpy as np
import pyarrow as pa

from tasks.curation import ngrams as ng


def _tokens(texts, kind):
    tk = ng.tokenize(texts, kind, spans=True)
    return [[tk.text(i, i + 1) for i in range(tk.offsets[d], tk.offsets[d + 1])] for d in range(tk.num_docs)]


def test_shingle_tokens_match_python_split():
    texts = ["  Solve 3x+5=11,  now!\t", "a\u2028b\u00a0c\u3000d\u1680e\x85f\u2029g", "x\ny", "", "tab\tsep"]
    ref = [unicodedata.normalize("NFKC", t).lower().split() for t in texts]
    assert _tokens(texts, "shingle") == ref


def test_word_tokens_match_python_regex():
    texts = ["What is $\\frac{1}{2}$? Give the final answer in \\boxed{}.", "αβγ — δ…ε", "x_1 + y_2 = 3.5"]
    ref = [re.findall(r"\w+", unicodedata.normalize("NFKC", t).lower()) for t in texts]
    assert _tokens(texts, "word") == ref


def test_full_width_digits_fold_to_ascii():
    a, b = ng.tokenize(["３ｘ＋５＝１１ ＳＯＬＶＥ", "3x+5=11 solve"], "shingle").hashes.reshape(2, 2)
    assert (a == b).all()


def test_numbers_and_punctuation_stay_inside_shingle_tokens():
    h = ng.tokenize(["3x+5=11", "7x+2=9"], "shingle")
    assert h.offsets.tolist() == [0, 1, 2] and h.hashes[0] != h.hashes[1]


def test_tokens_never_cross_document_boundaries():
    # the arrow buffer is "abcdef" with no separator between the two documents
    tk = ng.tokenize(["abc", "def"], "word")
    assert tk.offsets.tolist() == [0, 1, 2]
    assert tk.hashes[0] == ng.tokenize(["abc"], "word").hashes[0]


def test_hash_depends_only_on_token_not_batch_or_position():
    long = "x" * 45  # longer than the 8-byte blocks
    a = ng.tokenize([f"zz {long} foo", "foo"], "shingle")
    b = ng.tokenize([long], "shingle")
    assert a.hashes[1] == b.hashes[0] and a.hashes[2] == a.hashes[3] and len(set(a.hashes.tolist())) == 3


def test_no_collisions_among_many_distinct_tokens():
    words = [f"w{i}" for i in range(20000)] + ["a" * k for k in range(1, 70)]
    h = ng.tokenize([" ".join(words)], "shingle").hashes
    assert len(np.unique(h)) == len(words)


def test_ngrams_stay_inside_documents():
    tk = ng.tokenize(["a b c d", "e f"], "word")
    grams, off = ng.ngram_hashes(tk, 3, whole_short_docs=False)
    assert off.tolist() == [0, 2, 2]
    assert grams[0] == ng.ngram_hashes(ng.tokenize(["a b c"], "word"), 3, whole_short_docs=False)[0][0]


def test_short_document_gets_one_whole_shingle():
    tk = ng.tokenize(["a b", "a b c d e f", ""], "shingle")
    grams, off = ng.ngram_hashes(tk, 5, whole_short_docs=True)
    assert off.tolist() == [0, 1, 3, 3]
    assert grams[0] not in grams[1:]  # a length-salted whole-document gram, not a padded 5-gram


def test_breaks_remove_every_window_touching_them():
    tk = ng.tokenize(["a b c d e f g"], "word")
    breaks = np.zeros(7, bool)
    breaks[3] = True  # "d"
    assert ng.window_starts(tk.offsets, 3, breaks).tolist() == [0, 4]


def test_empty_and_null_input():
    tk = ng.tokenize(pa.array([None, ""], pa.string()), "word")
    assert tk.offsets.tolist() == [0, 0, 0] and len(tk.hashes) == 0
    assert ng.tokenize([], "shingle").num_docs == 0


def test_sequence_hash_ignores_case_and_spacing_but_not_order():
    keys = ng.sequence_hashes(ng.tokenize(["Compute  2+2.", " compute 2+2.\t", "2+2. compute", "", "  "], "shingle"))
    assert keys[0] == keys[1] and keys[0] != keys[2] and keys[3] == keys[4] and keys[0] != keys[3]


def test_first_of_equal_points_at_first_occurrence():
    assert ng.first_of_equal(np.array([5, 3, 5, 5, 3, 1])).tolist() == [-1, -1, 0, 0, 1, -1]

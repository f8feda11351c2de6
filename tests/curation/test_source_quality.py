from tasks.curation.schema import to_problem
from tasks.curation.source_quality import score_sources, top_sources


def test_source_scores_rank_complete_correct_sources_first():
    good = [to_problem({"problem": f"p{i}", "answer": "3", "response": "<think>a</think> \\boxed{3}"}, "good")
            for i in range(4)]
    wrong = [to_problem({"problem": f"q{i}", "answer": "3", "response": "<think>a</think> \\boxed{4}"}, "wrong")
             for i in range(4)]
    scores = score_sources({"wrong": wrong, "good": good, "bad": []}, {"wrong": 4, "good": 8, "bad": 3})
    assert scores["good"] == 0.5  # half its rows were malformed
    assert scores["bad"] == 0.0
    assert abs(scores["wrong"] - 2 / 3) < 1e-9  # every row well-formed, but the boxed answers disagree
    assert top_sources(scores, 2) == ["wrong", "good"]
    assert top_sources({"a": 1.0, "b": 1.0}, 1) == ["a"]  # ties keep the order given

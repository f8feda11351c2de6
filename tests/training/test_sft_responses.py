"""SFT's response rule (the paper's finding as a switch): all / correct / by_difficulty, graded with the
real math grader, every row counted with its outcome; file rows keep their difficulty tag."""
import json

import pytest

from tasks.training.sft_responses import response_outcome, select_responses

RIGHT = "<think>2 + 2 = 4</think> The answer is \\boxed{4}."
WRONG = "<think>2 + 2 = 5</think> The answer is \\boxed{5}."


@pytest.mark.parametrize("rule, correct, difficulty, outcome", [
    ("by_difficulty", False, "hard", "kept_incorrect_hard"),
    ("by_difficulty", False, "unsolved", "kept_incorrect_hard"),
    ("by_difficulty", False, "easy", "dropped_incorrect"),
    ("by_difficulty", False, "medium", "dropped_incorrect"),
    ("by_difficulty", False, None, "kept_untagged"),
    ("by_difficulty", False, "unknown", "kept_untagged"),
    ("by_difficulty", True, "easy", "kept_correct"),
    ("correct", False, "hard", "dropped_incorrect"),
    ("correct", True, None, "kept_correct"),
])
def test_response_outcome(rule, correct, difficulty, outcome):
    assert response_outcome(rule, correct, difficulty) == outcome


def test_rules_on_graded_math_responses():
    rows = [{"id": i, "domain": "math", "problem": "What is 2 + 2?", "answer": "4", "response": resp,
             "difficulty": tag} for i, (resp, tag) in enumerate([(RIGHT, "easy"), (WRONG, "easy"), (WRONG, "hard"),
                                                                 (RIGHT, "hard"), (WRONG, None)])]
    assert select_responses(rows, "all") == (rows, {"kept": 5})
    kept, counts = select_responses(rows, "correct")
    assert [r["id"] for r in kept] == [0, 3] and counts == {"dropped_incorrect": 3, "kept_correct": 2}
    kept, counts = select_responses(rows, "by_difficulty")
    assert [r["id"] for r in kept] == [0, 2, 3, 4]
    assert counts == {"dropped_incorrect": 1, "kept_correct": 2, "kept_incorrect_hard": 1, "kept_untagged": 1}


def test_a_canonical_file_keeps_difficulty_and_a_bad_tag_names_the_row(tmp_path):
    from tasks.curation.problems import read_problems

    data = tmp_path / "d.jsonl"
    row = {"domain": "math", "problem": "What is 2 + 2?", "answer": "4", "response": RIGHT}
    data.write_text(json.dumps({**row, "difficulty": "hard"}) + "\n")
    assert read_problems(str(data))[0][0]["difficulty"] == "hard"
    data.write_text(json.dumps({**row, "difficulty": "trivial"}) + "\n")
    with pytest.raises(ValueError, match=r"d.jsonl row 1: difficulty must be one of easy, medium, hard"):
        read_problems(str(data))


@pytest.mark.slow
def test_sft_trains_on_the_selected_responses_and_records_the_counts(tmp_path):
    from tasks.models.factory import init_model
    from tasks.training.sft import SFTConfig, train_sft

    rows = [{"domain": "math", "problem": f"What is {a} + 2?", "answer": str(a + 2),
             "response": f"<think>{a} + 2</think> \\boxed{{{a + 2 + (a % 2)}}}", "difficulty": ("easy", "hard")[a % 3 == 0]}
            for a in range(12)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = init_model(tmp_path / "m", [r["problem"] + r["response"] for r in rows], seed=0)
    res = train_sft(str(model), str(data), str(tmp_path / "sft"), SFTConfig(max_steps=2, batch_size=2, seq_len=128,
                                                                              responses="by_difficulty"))
    written = json.loads((tmp_path / "sft" / "sft_config.json").read_text())
    wrong_easy = sum(a % 2 == 1 and a % 3 != 0 for a in range(12))   # odd a: boxed a+3, wrong
    assert written["responses"]["dropped_incorrect"] == wrong_easy
    assert res.examples == written["examples"] == 12 - wrong_easy

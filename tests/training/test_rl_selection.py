"""RL data selection from difficulty tags: per-domain pass-rate windows (the paper's ≥ 0.5 by default),
an explicit rule for untagged problems, and every problem of the data counted as kept or with its reason."""
import pytest

from tasks.training.config import SelectionConfig
from tasks.training.rl_data import load_rl_rows, select_problem, select_rows

MATH = {"domain": "math", "problem": "p", "answer": "1"}
CODE = {"domain": "code", "problem": "p", "tests": {"inputs": [""], "outputs": ["1\\n"]}}
BOTH = ("math", "code")


@pytest.mark.parametrize("row, selection, outcome", [
    ({**MATH, "pass_rate": 0.5}, SelectionConfig(), "kept"),                    # the window's edge is in
    ({**MATH, "pass_rate": 0.4375}, SelectionConfig(), "below_window"),         # 7 of 16: not a majority
    ({**CODE, "pass_rate": 1.0}, SelectionConfig(), "kept"),                    # no upper bound by default
    ({**CODE, "pass_rate": 0.9}, SelectionConfig(code_max=0.8), "above_window"),
    ({**CODE, "pass_rate": 0.1}, SelectionConfig(code_min=None), "kept"),       # None: no bound
    (MATH, SelectionConfig(), "kept_untagged"),
    (MATH, SelectionConfig(untagged="exclude"), "untagged_excluded"),
    ({**MATH, "answer": None, "pass_rate": 1.0}, SelectionConfig(), "not_rewardable"),
    ({**CODE, "tests": None, "pass_rate": 1.0}, SelectionConfig(), "not_rewardable"),
])
def test_select_problem(row, selection, outcome):
    assert select_problem(row, BOTH, selection) == outcome


def test_other_domains_are_left_out_before_their_tags_are_read():
    assert select_problem({**CODE, "pass_rate": 0.0}, ("math",), SelectionConfig()) == "other_domain"


def test_every_row_is_counted_once_per_domain():
    rows = ([{**MATH, "id": f"m{i}", "pass_rate": i / 4} for i in range(5)] + [{**MATH, "id": "u"}]
            + [{**CODE, "id": f"c{i}", "pass_rate": i / 2} for i in range(3)])
    kept, counts = select_rows(rows, BOTH, SelectionConfig())
    assert [r["id"] for r in kept] == ["m2", "m3", "m4", "u", "c1", "c2"]
    assert counts.as_dict() == {"code": {"below_window": 1, "kept": 2},
                                "math": {"below_window": 2, "kept": 3, "kept_untagged": 1}}
    assert sum(sum(c.values()) for c in counts.as_dict().values()) == len(rows)
    assert counts.line() == "code: 2 kept, 1 below window; math: 4 kept (1 untagged), 2 below window"


def test_nothing_left_names_the_data_and_the_counts():
    with pytest.raises(ValueError, match=r"^d.jsonl: .* within the pass-rate windows \(math: 0 kept, 1 below"):
        select_rows([{**MATH, "pass_rate": 0.0}], BOTH, SelectionConfig(), "d.jsonl")


@pytest.mark.parametrize("rows, domains, selection, knobs", [
    ([{**MATH, "pass_rate": 0.1}], BOTH, SelectionConfig(), "try a lower selection.math_min (--selection-math-min)"),
    ([{**CODE, "pass_rate": 0.9}], BOTH, SelectionConfig(code_max=0.5), "try a higher selection.code_max (--selection-code-max)"),
    ([MATH], BOTH, SelectionConfig(untagged="exclude"), "try selection.untagged keep (--selection-untagged keep)"),
    ([CODE], ("math",), SelectionConfig(), "try domains naming the data's domains (--domains)"),
    ([{**MATH, "answer": None}], BOTH, SelectionConfig(), "try data with answers (math) or tests (code)"),
])
def test_nothing_left_names_the_setting_that_would_keep_problems(rows, domains, selection, knobs):
    with pytest.raises(ValueError) as e:
        select_rows(rows, domains, selection, "d.jsonl")
    assert str(e.value).endswith(knobs) and "\n" not in str(e.value)


def test_a_canonical_file_keeps_its_tags_and_a_bad_tag_names_the_row(tmp_path):
    import json

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({**MATH, "pass_rate": 0.25}) + "\n" + json.dumps({**MATH, "problem": "q", "pass_rate": 1}) + "\n")
    rows, _, counts = load_rl_rows(str(data), BOTH, SelectionConfig())
    assert [r["pass_rate"] for r in rows] == [1.0] and counts.as_dict() == {"math": {"below_window": 1, "kept": 1}}
    data.write_text(json.dumps({**MATH, "pass_rate": "high"}) + "\n")
    with pytest.raises(ValueError, match=r"d.jsonl row 1: pass_rate must be a number in \[0, 1\] or null, got 'high'"):
        load_rl_rows(str(data), BOTH, SelectionConfig())


def test_every_problem_has_its_fate_by_id():
    """One fate per row: each problem of the data with its outcome (kept, a REASONS entry, or left out
    after all because its prompt does not fit), as train_rl writes them to selection.jsonl."""
    rows = [{**MATH, "id": "a", "pass_rate": 0.9}, {**MATH, "id": "b", "pass_rate": 0.1},
            {**CODE, "id": "c", "tests": None}, {**MATH, "id": "d"}]
    kept, counts = select_rows(rows, BOTH, SelectionConfig())
    counts.prompt_too_long([r for r in kept if r["id"] == "d"])
    assert [(f["id"], f["outcome"]) for f in counts.fates] == [
        ("a", "kept"), ("b", "below_window"), ("c", "not_rewardable"), ("d", "prompt_too_long")]

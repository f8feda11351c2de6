"""Alarms for data a run would degrade in silence (tasks/pipeline/data_alarms.py): a canonical-layout source
whose rows carry a field a named layout reads, a source that kept no row, and math rows with no answer."""
import pyarrow as pa

from tasks.pipeline.data_alarms import (layout_alarms, lost_source_alarms, math_answers_by_source,
                                        unanswered_math_alarms)


def test_a_raw_openr1_or_taco_file_read_as_canonical_names_its_layout():
    rows = {"r1": {"problem": "p", "solution": "3", "generations": ["<think>…</think>"]},
            "taco": {"question": "q", "solutions": "[]", "input_output": "{}"},
            "mine": {"problem": "p", "response": "r"},
            "laid": {"question": "q", "solutions": "[]"}, "empty": None}
    alarms = layout_alarms(rows, {"laid": "taco"})
    assert len(alarms) == 2
    assert alarms[0].startswith("source r1: its rows carry `generations`") and "openr1-math" in alarms[0]
    assert alarms[1].startswith("source taco: its rows carry `solutions`") and "taco or apps" in alarms[1]


def test_a_source_that_kept_no_row_is_named_with_its_reasons():
    by_source = {"taco": {"rows_in": 10, "kept": 0, "invalid_tests": 9, "duplicate": 1},
                 "math": {"rows_in": 40, "kept": 38, "duplicate": 2}, "none": {"rows_in": 0, "kept": 0}}
    assert lost_source_alarms(by_source) == [
        "source taco: all 10 rows dropped (invalid_tests 9, duplicate 1); the run trains without them"]


def test_a_source_whose_math_rows_have_no_answer_is_named_with_the_setting_to_map_it():
    problems = pa.table({"source": ["r1", "r1", "mixed", "mixed", "taco"], "domain": ["math", "math", "math", "math", "code"],
                         "answer": [None, None, "3", None, None]})
    kept = math_answers_by_source(problems)
    assert kept == {"r1": (2, 0), "mixed": (2, 1)}  # code rows carry no answer and are no alarm
    alarms = unanswered_math_alarms(kept)
    assert len(alarms) == 1 and alarms[0].startswith("source r1: none of its 2 kept math rows has an answer")
    assert "sources.r1.field_map" in alarms[0] and "--map r1.FIELD=answer" in alarms[0]


def test_curate_also_names_a_source_where_only_some_math_rows_lack_an_answer():
    """`klear curate` (some=True) says how many of a source's math rows cannot be scored; the pipeline's
    alarm (strict fails on it) stays for a source with none answered: proofs among answered rows are no alarm."""
    kept = {"proofs": (5, 4), "none": (2, 0), "all": (3, 3), "half": (4, 2)}
    assert unanswered_math_alarms(kept) == unanswered_math_alarms({"none": (2, 0)})
    alarms = unanswered_math_alarms(kept, some=True)
    assert alarms[0] == ("source proofs: 1 of its 5 kept math rows has no answer (absent or null), so RL, "
                         "difficulty tagging and evaluation cannot score it (SFT still trains on it)")
    assert alarms[2] == ("source half: 2 of its 4 kept math rows have no answer (absent or null), so RL, "
                         "difficulty tagging and evaluation cannot score them (SFT still trains on them)")
    assert len(alarms) == 3 and alarms[1].startswith("source none: none of its 2 kept math rows has an answer, so "
                                                     "RL, difficulty tagging and evaluation can score none of them")

"""The cutoff date (tasks/curation/cutoff.py): one behaviour per test."""
import datetime

import pytest

from tasks.curation.config import CurateConfig
from tasks.curation.cutoff import after_cutoff, check_cutoff_date, is_undated

CUT = "2024-08-01"


def test_a_row_dated_before_the_cutoff_is_kept():
    assert after_cutoff(["2024-07-31"], CUT) == [None]


def test_a_row_dated_on_the_cutoff_day_is_dropped():
    assert after_cutoff(["2024-08-01"], CUT) == ["dated 2024-08-01, on or after cutoff 2024-08-01"]


def test_a_row_dated_after_the_cutoff_is_dropped():
    assert after_cutoff(["2025-01-02"], CUT) == ["dated 2025-01-02, on or after cutoff 2024-08-01"]


def test_undated_rows_are_kept_by_default():
    assert after_cutoff([None, ""], CUT) == [None, None]


def test_undated_rows_are_dropped_with_undated_drop():
    assert after_cutoff([None, "2020-01-01"], CUT, "drop") == [
        "no date (cutoff 2024-08-01, undated rows dropped)", None]


@pytest.mark.parametrize("bad", ["2024-13-01", "2024-02-30", "20240801", "2024-8-1", "2024-08-01T00:00", "", "soon"])
def test_a_bad_cutoff_is_refused(bad):
    with pytest.raises(ValueError, match="not a calendar date written YYYY-MM-DD"):
        check_cutoff_date(bad)


def test_a_bad_undated_setting_is_refused():
    with pytest.raises(ValueError, match="undated must be one of keep, drop"):
        after_cutoff([None], CUT, "maybe")


def test_config_checks_the_cutoff_date_itself():
    with pytest.raises(ValueError, match="cutoff_date"):
        CurateConfig(sources=[{"name": "a", "path": "a.jsonl"}], cutoff_date="2024-02-30")


def test_config_takes_a_date_value_as_yaml_reads_it():
    cfg = CurateConfig(sources=[{"name": "a", "path": "a.jsonl"}], cutoff_date=datetime.date(2024, 8, 1))
    assert cfg.cutoff_date == CUT and cfg.fields_dict()["cutoff_date"] == CUT


def test_none_and_blank_dates_are_undated():
    assert [is_undated(v) for v in (None, "", "   ")] == [True, True, True]


def test_a_date_is_not_undated():
    assert is_undated("2024-07-31") is False


def test_after_cutoff_treats_a_blank_date_as_undated():
    """The cutoff itself follows is_undated: a blank date is no date, dropped with undated drop."""
    assert after_cutoff(["  "], CUT, "drop") == ["no date (cutoff 2024-08-01, undated rows dropped)"]

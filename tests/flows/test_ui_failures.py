"""The one line a failed run ends with (flows/prefect_ui.py), without a server: what it says for bad input,
a bug, a pipeline stage and a bad parameter, and that Prefect's own report of a failure the flow reports is
moved to DEBUG. Through a real server and the run's logs: tests/flows/test_pipeline_flow.py."""
import logging

import pytest


def test_bad_input_is_the_message_after_the_flow_name():
    from flows.prefect_ui import failure_line

    assert failure_line("rl", ValueError("data.jsonl: row 3:\n  no answer")) == "rl: data.jsonl: row 3: no answer"


def test_a_bug_keeps_its_type_and_a_message_naming_its_flow_stays_as_it_is():
    from flows.prefect_ui import failure_line

    assert failure_line("sft", KeyError("loss")) == "sft: KeyError: 'loss'"
    line = "pipeline: stage sft failed: child flow run x (1) of sft/default ended Cancelled"
    assert failure_line("pipeline", RuntimeError(line)) == line


def test_a_pipeline_stage_that_fails_is_named_in_the_line():
    from flows.pipeline import NamedStages
    from flows.prefect_ui import failure_line

    stages = NamedStages(2, also=lambda _: None)
    with pytest.raises(ValueError) as err:
        with stages.stage("curate"):
            pass
        with stages.stage("rl"):
            raise ValueError("store#ds-1: no rewardable problems")
    assert failure_line("pipeline", err.value) == "pipeline: stage rl failed: store#ds-1: no rewardable problems"


def test_a_very_long_message_is_cut_to_one_bounded_line():
    from flows.prefect_ui import MAX_LINE, failure_line

    line = failure_line("evaluate", ValueError("x" * 5000))
    assert len(line) == MAX_LINE and line.endswith("…")


@pytest.mark.parametrize("config, line", [
    ({"lr": -1}, "parameter config: lr (--lr) must be above 0.0 (got -1.0)"),
    ({"reward": {"code_mode": "x"}}, "parameter config: reward.code_mode (--reward-code-mode) must be one of"),
    ({"steps": "many"}, "parameter config: steps: Input should be a valid integer"),
])
def test_a_bad_parameter_is_one_line_naming_parameter_field_and_flag(config, line):
    from flows.prefect_ui import _type_adapters, _typed
    from flows.rl import rl

    with pytest.raises(ValueError) as err:
        _typed("config", config, _type_adapters(rl.fn)())
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


def test_prefects_report_of_a_reported_failure_goes_to_debug(monkeypatch):
    """The filter on Prefect's run loggers: a record carrying a reported exception, or a "Finished in state"
    line repeating a reported line, becomes DEBUG (dropped at INFO); other records pass unchanged."""
    from collections import deque

    from flows import prefect_ui

    exc = ValueError("data.jsonl: row 3: no answer")
    setattr(exc, prefect_ui.REPORTED, True)
    monkeypatch.setattr(prefect_ui, "_REPORTED_LINES", deque(["rl: data.jsonl: row 3: no answer"]))
    logger = logging.getLogger("prefect.flow_runs")
    monkeypatch.setattr(logger, "level", logging.INFO)
    monkeypatch.setattr(logger, "_cache", {})  # isEnabledFor's cache, which setLevel would clear

    def record(msg, exc_info=None, level=logging.ERROR):
        return logging.LogRecord("prefect.flow_runs", level, __file__, 1, msg, (), exc_info)

    engine = record("Engine execution exited with unexpected exception", (ValueError, exc, None))
    finished = record("Finished in state Failed('rl: data.jsonl: row 3: no answer')", level=logging.INFO)
    other = record("Finished in state Failed('something else')")
    f = prefect_ui._PrefectFailureReports()
    assert not f.filter(engine) and engine.levelno == logging.DEBUG
    assert not f.filter(finished)
    assert f.filter(other) and other.levelno == logging.ERROR

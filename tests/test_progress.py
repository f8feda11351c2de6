"""tasks/progress.py: plain lines off a terminal (never a redraw), a rich bar on one, stage lines."""
import io
import re

import pytest

from tasks.progress import (ProgressLine, Shifted, StageLog, StepProgress, format_duration, format_number,
                            progress_mode)


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_plain_lines_are_throttled_and_carry_step_figures_rate_and_eta():
    out, clock = io.StringIO(), Clock()
    p = StepProgress("sft", stream=out, mode="plain", interval=5.0, clock=clock)
    for step in range(1, 101):  # 1 s and 1,000 tokens a step
        clock.t += 1.0
        p.update(step, 100, tokens=1000, loss=1.0 / step)
    p.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert lines[0] == "sft step 1/100 loss 1.000 tok/s 1,000 eta 1m39s"
    assert lines[1] == "sft step 6/100 loss 0.167 tok/s 1,000 eta 1m34s"
    assert lines[-1] == "sft step 100/100 loss 0.010 tok/s 1,000 done in 1m40s"
    assert len(lines) == 1 + 99 // 5 + 1  # the first step, every 5 s, the last step


def test_a_resumed_run_counts_rate_and_eta_from_where_it_resumed():
    out, clock = io.StringIO(), Clock()
    p = StepProgress("rl gppo", start_step=10, stream=out, mode="plain", clock=clock)
    clock.t += 2.0
    p.update(11, 20, tokens=500, reward=0.25)
    assert out.getvalue() == "rl gppo step 11/20 reward 0.250 tok/s 250 eta 18s\n"


def test_off_writes_nothing_and_a_closed_stream_never_raises():
    out = io.StringIO()
    StepProgress("sft", stream=out, mode="off").update(1, 2, loss=1.0)
    assert out.getvalue() == ""
    closed = io.StringIO()
    closed.close()
    StepProgress("sft", stream=closed, mode="plain").update(1, 2, loss=1.0)


def test_mode_follows_the_terminal_and_the_environment(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("KLEAR_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert progress_mode(io.StringIO()) == "plain"
    assert progress_mode(Tty()) == "bar"
    monkeypatch.setenv("TERM", "dumb")
    assert progress_mode(Tty()) == "plain"
    monkeypatch.setenv("KLEAR_PROGRESS", "off")
    assert progress_mode(Tty()) == "off"


def test_bar_mode_draws_a_rich_bar_and_stops_it():
    out, clock = io.StringIO(), Clock()
    p = StepProgress("sft", stream=out, mode="bar", clock=clock)
    with p:
        for step in range(1, 4):
            clock.t += 1.0
            p.update(step, 3, tokens=10, loss=0.5)
    assert p._bar is None and p.lines == 0  # no plain lines in bar mode
    assert re.search(r"3/3", out.getvalue())


@pytest.mark.parametrize("s, text", [(0, "0s"), (45.4, "45s"), (190, "3m10s"), (3720, "1h02m")])
def test_durations(s, text):
    assert format_duration(s) == text


@pytest.mark.parametrize("v, text", [(0.0, "0.000"), (0.41234, "0.412"), (-0.5039, "-0.504"), (6.29, "6.290"),
                                     (0.0000123, "1.23e-05"), (12345.0, "1.23e+04"), (7, "7")])
def test_numbers(v, text):
    assert format_number(v) == text


def test_stage_lines_say_cached_or_computed_seconds_and_figure():
    out, clock, said = io.StringIO(), Clock(), []
    log = StageLog(2, stream=out, also=said.append, clock=clock)
    with log.stage("curate") as st:
        clock.t += 12.34
        st.cached, st.figure = False, "412 of 500 rows kept"
    with pytest.raises(RuntimeError):
        with log.stage("sft") as st:
            clock.t += 1
            raise RuntimeError("boom")
    assert out.getvalue().splitlines() == [
        "stage 1/2 curate: started", "stage 1/2 curate: computed in 12.3s, 412 of 500 rows kept",
        "stage 2/2 sft: started", "stage 2/2 sft: failed after 1.0s (RuntimeError)"]
    assert said == out.getvalue().splitlines()


def test_a_feed_gets_lines_at_its_own_cadence_whatever_the_terminal_shows():
    """The feed (a run log, a progress artifact) gets the first update, one line per interval and the last
    step, with the fraction done, even when the terminal mode is `off`."""
    clock, fed = Clock(), []
    p = StepProgress("sft", mode="off", feed=fed.append, feed_interval=10.0, clock=clock)
    for step in range(1, 31):  # 1 s and 100 tokens a step
        clock.t += 1.0
        p.update(step, 30, tokens=100, loss=0.5)
    assert [line.split(" loss")[0] for line in fed] == ["sft step 1/30", "sft step 11/30", "sft step 21/30",
                                                       "sft step 30/30"]
    assert [line.fraction for line in fed] == [1 / 30, 11 / 30, 21 / 30, 1.0]
    assert fed[1] == "sft step 11/30 loss 0.500 tok/s 100 eta 19s"
    assert isinstance(fed[0], str) and isinstance(fed[0], ProgressLine)


def test_an_anchored_progress_counts_rate_and_eta_from_its_first_update():
    """start_step=None (an observer that sees steps only as they complete, after model loading): the first
    update's step and work count as done before the clock starts."""
    clock, fed = Clock(), []
    p = StepProgress("rl gppo", start_step=None, mode="off", feed=fed.append, feed_interval=0.0, clock=clock)
    clock.t += 60.0  # loading the model: not a step
    p.update(5, 20, tokens=1000, reward=0.5)  # a resumed run's first step
    clock.t += 2.0
    p.update(6, 20, tokens=300, reward=0.5)
    assert fed == ["rl gppo step 5/20 reward 0.500", "rl gppo step 6/20 reward 0.500 tok/s 150 eta 28s"]


def test_items_with_an_unknown_total_then_a_known_one():
    out, clock = io.StringIO(), Clock()
    p = StepProgress("curate read a", unit="rows", rate_unit="rows/s", stream=out, mode="plain", interval=0.0,
                     clock=clock)
    clock.t += 2.0
    p.update(256, None, tokens=256)
    clock.t += 1.0
    p.update(300, 300, tokens=44, kept=298)
    assert out.getvalue().splitlines() == ["curate read a rows 256 rows/s 128",
                                           "curate read a rows 300/300 kept 298 rows/s 44 done in 3s"]


def test_a_failing_feed_is_dropped_and_the_loop_goes_on(caplog):
    calls = []

    def feed(line):
        calls.append(line)
        raise ConnectionError("API down")

    out = io.StringIO()
    p = StepProgress("sft", stream=out, mode="plain", interval=0.0, feed=feed, feed_interval=0.0)
    p.update(1, 3, loss=1.0)
    p.update(2, 3, loss=1.0)
    assert len(calls) == 1 and "progress feed failed" in caplog.text
    assert len(out.getvalue().splitlines()) == 2  # the terminal lines go on


def test_bar_mode_with_an_unknown_total_runs_and_stops():
    out = io.StringIO()
    with StepProgress("curate read a", unit="rows", stream=out, mode="bar") as p:
        p.update(256, None, tokens=256)
        p.update(300, 300, tokens=44)
    assert "300/300" in out.getvalue()


def test_shifted_counts_a_later_loop_on_from_the_earlier_ones():
    out, clock = io.StringIO(), Clock()
    p = StepProgress("verify code", unit="problems", stream=out, mode="plain", interval=0.0, clock=clock)
    p.update(4, 4, tokens=4)
    clock.t += 1.0
    Shifted(p, 4).update(2, 6, tokens=2, weak=1)
    assert out.getvalue().splitlines()[-1] == "verify code problems 6/10 weak 1 tok/s 2 eta 1s"

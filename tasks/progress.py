"""Progress you can watch: a per-step (or per-item) reporter for long loops and a per-stage log for pipelines.

On an interactive terminal a loop shows a rich progress bar (step/total, loss or reward, tokens/s, ETA);
anywhere else (CI, a log file, a Prefect worker) it writes one plain line every few seconds, never a bar
redraw:

    sft step 120/1858 loss 0.412 tok/s 9,812 eta 3m10s
    eval bench_math problems 32/80 samples 128 correct 61 tok/s 2,410 eta 41s

A `feed` callback gets the same lines at most every few seconds, whatever the terminal shows: the Prefect
task wrappers pass one that writes the run log and moves a progress artifact (this module stays pure).

One protocol, in every stage: a loop reports to a `Progress` (`update(done, total, tokens=…, **figures)`;
StepProgress is the one that draws), and a stage takes a `Feed` (where its lines go besides the terminal)
and makes its StepProgress itself. `Shifted` counts one loop on after another in one Progress.

`KLEAR_PROGRESS` picks the mode: `auto` (default: bar on a terminal, else plain), `bar`, `plain` or
`off`; `KLEAR_PROGRESS_INTERVAL` the seconds between plain lines (default 5). Output goes to stderr, so
stdout keeps a command's results (JSON lines, tables). The per-step cost is a clock read and a few
additions; a line is formatted only when one is due. Pure Python: stdlib, plus rich for the bar.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, TextIO

log = logging.getLogger(__name__)

MODES = ("auto", "bar", "plain", "off")
PLAIN_INTERVAL_S = 5.0   # between plain lines: ~12 lines a minute reads well in a log
BAR_INTERVAL_S = 1.0     # between tokens/s and ETA refreshes of the bar (the bar itself moves every step)


def progress_mode(stream: TextIO | None = None) -> str:
    """`bar`, `plain` or `off`: $KLEAR_PROGRESS, else a bar when `stream` (default stderr) is a terminal."""
    mode = os.environ.get("KLEAR_PROGRESS", "auto").strip().lower() or "auto"
    if mode not in MODES:
        mode = "auto"
    if mode != "auto":
        return mode
    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real file
        tty = False
    return "bar" if tty and os.environ.get("TERM", "") not in ("dumb", "unknown") else "plain"


def _interval(default: float) -> float:
    try:
        return max(0.0, float(os.environ["KLEAR_PROGRESS_INTERVAL"]))
    except (KeyError, ValueError):
        return default


def format_duration(seconds: float) -> str:
    """45s, 3m10s, 1h02m."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def format_number(v: float) -> str:
    """Three decimals (0.412, 6.290, -0.504), three significant digits outside [0.001, 1000); ints as they are."""
    if isinstance(v, int):
        return str(v)
    return f"{v:.3f}" if v == 0 or 1e-3 <= abs(v) < 1e3 else f"{v:.3g}"


def format_figures(figures: dict[str, float]) -> str:
    """`loss 0.412 reward 0.700`."""
    return " ".join(f"{k} {format_number(v)}" for k, v in figures.items())


class ProgressLine(str):
    """A progress line that also carries the fraction done (None while the total is unknown): a callback
    that takes text (a log's `info`) uses it as the text it is, a gauge (a progress artifact) reads
    `.fraction`."""

    fraction: float | None

    def __new__(cls, text: str, fraction: float | None = None) -> ProgressLine:
        line = super().__new__(cls, text)
        line.fraction = fraction
        return line


Feed = Callable[[ProgressLine], None]  # where a stage's progress lines go besides the terminal (a run log)


class Progress(Protocol):
    """What a loop reports to: `done` of `total` (None while unknown), `tokens` the work done since the last
    update (shown as a rate), `figures` shown as they are (`loss 0.412`, `kept 1802`)."""

    def update(self, step: int, total: int | None, tokens: float = 0, **figures: float) -> None: ...


class Shifted:
    """A Progress that reports to `progress` with `by` steps already done: loops run one after another (the
    verify stage's reference runs, then its mutant passes) count on in one line."""

    def __init__(self, progress: Progress, by: int):
        self.progress, self.by = progress, by

    def update(self, step: int, total: int | None, tokens: float = 0, **figures: float) -> None:
        self.progress.update(self.by + step, None if total is None else self.by + total, tokens, **figures)


class _Cadence:
    """When an output is due — at its first update, at the last step, else once `interval` seconds have
    passed since it was last due — and the rate (tokens or items per second) over that stretch."""

    def __init__(self, interval: float, t0: float):
        self.interval = interval
        self.last: float | None = None
        self.window = (t0, 0.0)  # (time, work) when it was last due
        self.rate: float | None = None

    def due(self, step: int, total: int | None, now: float, work: float) -> bool:
        final = total is not None and step >= total
        if self.last is not None and not final and now - self.last < self.interval:
            return False
        t_w, work_w = self.window
        if now > t_w and work > work_w:
            self.rate = (work - work_w) / (now - t_w)
        self.window, self.last = (now, work), now
        return True


class StepProgress:
    """Progress of a loop of `total` steps (or items: `unit="problems"`; `total` None while unknown). Call
    `update(step, total, tokens=…, loss=…)` once per step (`step` counts from 1; `tokens` is the work this
    step did, shown as a rate in `rate_unit`), `close()` at the end (also a context manager).

    `start_step` is where a resumed run begins: rates and ETA count from there. None anchors the progress
    at its first update (that step and its work count as done before the clock started), for an observer
    that only sees steps as they complete (a Prefect task wrapper's `on_step`).

    `feed`, if given, gets a `ProgressLine` at its own cadence — the first update, the last step, then at
    most one every `feed_interval` seconds (default: the plain-line interval) — whatever the terminal mode,
    `off` included: it is for slow sinks such as a run log and a progress artifact. A feed that raises is
    logged once and dropped; it never stops the loop.

    `stream` (default: stderr at the time of writing) and `mode` (default: `progress_mode()`) are for tests."""

    def __init__(self, name: str, *, unit: str = "step", rate_unit: str = "tok/s", start_step: int | None = 0,
                 stream: TextIO | None = None, mode: str | None = None, interval: float | None = None,
                 feed: Callable[[ProgressLine], None] | None = None, feed_interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.name, self.unit, self.rate_unit = name, unit, rate_unit
        self._stream = stream
        self.mode = mode or progress_mode(stream)
        self.interval = interval if interval is not None else _interval(
            BAR_INTERVAL_S if self.mode == "bar" else PLAIN_INTERVAL_S)
        self._clock = clock
        self._t0 = clock()
        self._start_step = start_step
        self._work = 0.0                       # since the start (or the anchor)
        self._out = _Cadence(self.interval, self._t0)
        self._feed = feed
        self._feed_at = _Cadence(feed_interval if feed_interval is not None else _interval(PLAIN_INTERVAL_S),
                                 self._t0)
        self._bar = None
        self._task = None
        self.lines = 0                         # plain lines written (tests)

    # -- per step ----------------------------------------------------------------------------
    def update(self, step: int, total: int | None, tokens: float = 0, **figures: float) -> None:
        now = self._clock()
        if self._start_step is None:  # anchored here: this step's work happened before the clock started
            self._start_step, self._t0, tokens = step, now, 0
            self._out.window = self._feed_at.window = (now, 0.0)
        self._work += tokens
        if self._feed is not None and self._feed_at.due(step, total, now, self._work):
            self._send(step, total, figures, now)
        if self.mode == "off":
            return
        due = self._out.due(step, total, now, self._work)
        if self.mode == "bar":
            self._update_bar(step, total, figures, due, now)
        elif due:
            self._write(self.line(step, total, figures, now) + "\n")

    def line(self, step: int, total: int | None, figures: dict, now: float | None = None,
             rate: float | None = None) -> str:
        """`sft step 120/1858 loss 0.412 tok/s 9,812 eta 3m10s`; `rate` defaults to the terminal's."""
        parts = [f"{self.name} {self.unit} {step}/{total}" if total is not None else f"{self.name} {self.unit} {step}"]
        if figures:
            parts.append(format_figures(figures))
        rate = self._out.rate if rate is None else rate
        if rate is not None:
            parts.append(f"{self.rate_unit} {rate:,.0f}")
        eta = self._eta(step, total, self._clock() if now is None else now)
        if eta is not None:
            parts.append(f"eta {format_duration(eta)}" if step < total else f"done in {format_duration(eta)}")
        return " ".join(parts)

    def _eta(self, step: int, total: int | None, now: float) -> float | None:
        """Remaining seconds at the mean step time of this run; at the end, the run's elapsed time."""
        done = step - (self._start_step or 0)
        if total is None or done <= 0:
            return None
        elapsed = now - self._t0
        return elapsed if step >= total else elapsed / done * (total - step)

    # -- output --------------------------------------------------------------------------------
    def _send(self, step: int, total: int | None, figures: dict, now: float) -> None:
        fraction = min(1.0, step / total) if total else None
        try:
            self._feed(ProgressLine(self.line(step, total, figures, now, self._feed_at.rate), fraction))
        except Exception as e:  # a run log or artifact API that fails never stops the loop
            log.warning("%s: progress feed failed, no more progress there (%s: %s)", self.name, type(e).__name__, e)
            self._feed = None

    def _write(self, text: str) -> None:
        stream = self._stream or sys.stderr
        try:
            stream.write(text)
            stream.flush()
            self.lines += 1
        except (OSError, ValueError):  # a closed pipe never stops training
            pass

    def _update_bar(self, step: int, total: int | None, figures: dict, due: bool, now: float) -> None:
        if self._bar is None:
            self._start_bar(total)
        fields = {"figures": format_figures(figures)}
        if due:
            eta = self._eta(step, total, now)
            rate = self._out.rate
            fields["rate"] = f"{self.rate_unit} {rate:,.0f}" if rate is not None else ""
            fields["eta"] = ("eta " if step < total else "done in ") + format_duration(eta) if eta is not None else ""
        self._bar.update(self._task, completed=step, total=total, **fields)

    def _start_bar(self, total: int | None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        console = Console(file=self._stream) if self._stream is not None else Console(stderr=True)
        self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("{task.fields[figures]}"), TextColumn("{task.fields[rate]}"),
                             TextColumn("{task.fields[eta]}"), console=console, refresh_per_second=4)
        self._task = self._bar.add_task(f"{self.name} {self.unit}", total=total, completed=self._start_step or 0,
                                        figures="", rate="", eta="")
        self._bar.start()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> StepProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class Stage:
    """What a pipeline stage reports when it ends: `cached` (found finished, None when it does not
    apply) and `figure`, its headline number in words (`412 of 500 rows kept`, `final loss 0.41`)."""
    name: str
    cached: bool | None = None
    figure: str = ""


class StageLog:
    """One line when each stage of a pipeline starts and one when it ends (cached or computed, seconds,
    headline figure), to stderr and to `also` (e.g. a Prefect run logger's `info`):

        stage 5/10 sft: started
        stage 5/10 sft: computed in 241.3s, 1858 steps, final loss 0.4123
    """

    def __init__(self, total: int | None = None, *, stream: TextIO | None = None,
                 also: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic):
        self.total = total
        self._stream = stream
        self._also = also
        self._clock = clock
        self._n = 0
        self.off = os.environ.get("KLEAR_PROGRESS", "").strip().lower() == "off"

    @contextmanager
    def stage(self, name: str) -> Iterator[Stage]:
        self._n += 1
        label = f"stage {self._n}/{self.total} {name}" if self.total else f"stage {self._n} {name}"
        self._say(f"{label}: started")
        st = Stage(name)
        t0 = self._clock()
        try:
            yield st
        except BaseException as e:
            self._say(f"{label}: failed after {self._clock() - t0:.1f}s ({type(e).__name__})")
            raise
        how = {True: "cached", False: "computed", None: "done"}[st.cached]
        self._say(f"{label}: {how} in {self._clock() - t0:.1f}s" + (f", {st.figure}" if st.figure else ""))

    def _say(self, text: str) -> None:
        if self._also:
            self._also(text)
        if self.off:
            return
        stream = self._stream or sys.stderr
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass

"""Progress you can watch: a per-step reporter for training loops and a per-stage log for pipelines.

On an interactive terminal a training loop shows a rich progress bar (step/total, loss or reward,
tokens/s, ETA); anywhere else (CI, a log file, a Prefect worker) it writes one plain line every few
seconds, never a bar redraw:

    sft step 120/1858 loss 0.412 tok/s 9,812 eta 3m10s

`KLEAR_PROGRESS` picks the mode: `auto` (default: bar on a terminal, else plain), `bar`, `plain` or
`off`; `KLEAR_PROGRESS_INTERVAL` the seconds between plain lines (default 5). Output goes to stderr, so
stdout keeps a command's results (JSON lines, tables). The per-step cost is a clock read and a few
additions; a line is formatted only when one is due. Pure Python: stdlib, plus rich for the bar.
"""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, TextIO

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


class StepProgress:
    """Progress of a loop of `total` steps. Call `update(step, total, tokens=…, loss=…)` once per step
    (`step` counts from 1; `tokens` are the tokens this step processed), `close()` at the end (also a
    context manager). `start_step` is where a resumed run begins: rates and ETA count from there.
    `stream` (default: stderr at the time of writing) and `mode` (default: `progress_mode()`) are for tests."""

    def __init__(self, name: str, *, start_step: int = 0, stream: TextIO | None = None, mode: str | None = None,
                 interval: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.name = name
        self._stream = stream
        self.mode = mode or progress_mode(stream)
        self.interval = interval if interval is not None else _interval(
            BAR_INTERVAL_S if self.mode == "bar" else PLAIN_INTERVAL_S)
        self._clock = clock
        self._t0 = clock()
        self._start_step = start_step
        self._tokens = 0                       # since start
        self._window = (self._t0, 0)           # (time, tokens) at the last refresh
        self._last_emit: float | None = None
        self._rate: float | None = None
        self._bar = None
        self._task = None
        self.lines = 0                         # plain lines written (tests)

    # -- per step ----------------------------------------------------------------------------
    def update(self, step: int, total: int, tokens: float = 0, **figures: float) -> None:
        if self.mode == "off":
            return
        now = self._clock()
        self._tokens += tokens
        due = self._last_emit is None or step >= total or now - self._last_emit >= self.interval
        if due:
            t_w, tok_w = self._window
            if now > t_w and self._tokens > tok_w:
                self._rate = (self._tokens - tok_w) / (now - t_w)
            self._window = (now, self._tokens)
            self._last_emit = now
        if self.mode == "bar":
            self._update_bar(step, total, figures, due, now)
        elif due:
            self._write(self.line(step, total, figures, now) + "\n")

    def line(self, step: int, total: int, figures: dict, now: float | None = None) -> str:
        parts = [f"{self.name} step {step}/{total}"]
        if figures:
            parts.append(format_figures(figures))
        if self._rate is not None:
            parts.append(f"tok/s {self._rate:,.0f}")
        eta = self._eta(step, total, self._clock() if now is None else now)
        if eta is not None:
            parts.append(f"eta {format_duration(eta)}" if step < total else f"done in {format_duration(eta)}")
        return " ".join(parts)

    def _eta(self, step: int, total: int, now: float) -> float | None:
        """Remaining seconds at the mean step time of this run; at the end, the run's elapsed time."""
        done = step - self._start_step
        if done <= 0:
            return None
        elapsed = now - self._t0
        return elapsed if step >= total else elapsed / done * (total - step)

    # -- output --------------------------------------------------------------------------------
    def _write(self, text: str) -> None:
        stream = self._stream or sys.stderr
        try:
            stream.write(text)
            stream.flush()
            self.lines += 1
        except (OSError, ValueError):  # a closed pipe never stops training
            pass

    def _update_bar(self, step: int, total: int, figures: dict, due: bool, now: float) -> None:
        if self._bar is None:
            self._start_bar(total)
        fields = {"figures": format_figures(figures)}
        if due:
            eta = self._eta(step, total, now)
            fields["rate"] = f"tok/s {self._rate:,.0f}" if self._rate is not None else ""
            fields["eta"] = ("eta " if step < total else "done in ") + format_duration(eta) if eta is not None else ""
        self._bar.update(self._task, completed=step, total=total, **fields)

    def _start_bar(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        console = Console(file=self._stream) if self._stream is not None else Console(stderr=True)
        self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("{task.fields[figures]}"), TextColumn("{task.fields[rate]}"),
                             TextColumn("{task.fields[eta]}"), console=console, refresh_per_second=4)
        self._task = self._bar.add_task(self.name, total=total, completed=self._start_step,
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

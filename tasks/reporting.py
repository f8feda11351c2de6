"""Charts and images for run reports: PNG curves and bars (matplotlib, headless), and a PNG as markdown
(a data URL under its alt text) for Prefect markdown artifacts. Low level, so evaluation and training both
draw with it. Also the command a run report prints to open its TensorBoard logs (tensorboard_command)."""
from __future__ import annotations

import base64
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Iterable

from tasks.stats import mean_ci95


def tensorboard_command(logdir: str | Path) -> str:
    """A shell command that opens TensorBoard on `logdir` from any working directory: the `tensorboard`
    script of the running interpreter's environment (beside sys.executable, not resolved through its
    symlink, which would leave a virtualenv), else the one on PATH, else `PYTHON -m tensorboard.main`;
    every path absolute and quoted for the shell."""
    beside = Path(os.path.abspath(sys.executable)).parent / ("tensorboard.exe" if os.name == "nt" else "tensorboard")
    found = str(beside) if beside.is_file() else shutil.which("tensorboard")
    program = [os.path.abspath(found)] if found else [os.path.abspath(sys.executable), "-m", "tensorboard.main"]
    return shlex.join([*program, "--logdir", os.path.abspath(logdir)])


def png_data_url(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


def chart_markdown(png: Path, alt: str, caption: str = "") -> str:
    """Markdown showing a PNG chart inline (as a data URL) with `alt` as its text, then `caption`: for a
    Prefect markdown artifact. An image artifact would print its whole URL beside the image, and a data
    URL is tens of kilobytes of base64."""
    alt = alt.replace("[", "(").replace("]", ")")
    return f"![{alt}]({png_data_url(png)})\n" + (f"\n{caption}\n" if caption else "")


def _pyplot():
    """pyplot on the headless Agg backend, imported at the first chart (matplotlib is slow to import)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_curve(rows: Iterable[dict], key: str, out: Path, title: str) -> Path:
    plt = _pyplot()

    rows = [r for r in rows if key in r]
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot([r["step"] for r in rows], [r[key] for r in rows])
    ax.set_xlabel("step")
    ax.set_ylabel(key)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return Path(out)


def plot_bars(values: dict[str, float], out: Path, title: str) -> Path:
    plt = _pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.bar(list(values), list(values.values()))
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return Path(out)


def plot_arms(curves: dict[str, list[list[dict]]], keys: tuple[str, ...], out: Path, title: str) -> Path:
    """One panel per metric key; per arm, the mean over its runs (seeds) of the key at each step where
    every run logged it, in a band of its 95% interval (mean ± t(0.975, n−1)·s/√n) when there are ≥ 2 runs."""
    plt = _pyplot()

    legend_rows = -(-len(curves) // 3)  # the arms' legend below the panels, three to a row: it covers no curve
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.5 + 0.25 * legend_rows), dpi=100,
                             squeeze=False)
    for ax, key in zip(axes[0], keys):
        for arm, runs in curves.items():
            per_run = [{r["step"]: r[key] for r in rows if key in r} for rows in runs]
            steps = sorted(set.intersection(*(set(p) for p in per_run))) if per_run else []
            stats = [mean_ci95([p[s] for p in per_run]) for s in steps]
            line, = ax.plot(steps, [m for m, _ in stats], marker=".", label=arm)
            if len(per_run) > 1 and steps:
                ax.fill_between(steps, [m - h for m, h in stats], [m + h for m, h in stats],
                                color=line.get_color(), alpha=0.15, linewidth=0)
        ax.set_xlabel("step")
        ax.set_title(key)
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(3, max(1, len(labels))), fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.25 * legend_rows / (3.5 + 0.25 * legend_rows) + 0.02, 1, 1))
    fig.savefig(out)
    plt.close(fig)
    return Path(out)

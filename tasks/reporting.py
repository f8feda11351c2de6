"""Charts and images for run reports: PNG curves and bars (matplotlib, headless), and a PNG as a data URL
for Prefect image artifacts. Low level, so evaluation and training both draw with it."""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Iterable


def png_data_url(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


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
    every run logged it."""
    plt = _pyplot()

    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.5), dpi=100, squeeze=False)
    for ax, key in zip(axes[0], keys):
        for arm, runs in curves.items():
            per_run = [{r["step"]: r[key] for r in rows if key in r} for rows in runs]
            steps = sorted(set.intersection(*(set(p) for p in per_run))) if per_run else []
            ax.plot(steps, [sum(p[s] for p in per_run) / len(per_run) for s in steps], marker=".", label=arm)
        ax.set_xlabel("step")
        ax.set_title(key)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return Path(out)

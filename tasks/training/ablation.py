"""Ablations over RL settings: arms, their configs, content-addressed run directories, and the summary.

An ablation varies one or more RLConfig fields over values (`{"loss": ["gppo", "grpo"], "sft_alpha":
[0, 0.1]}` → 4 arms, the cartesian product in the given order) and trains every arm once per seed from the
same model on the same data. A run's directory is keyed by what determines its result — the model's
checkpoint id, the data, the arm's full config (seed included) and the training code — so a rerun trains
nothing, an added seed or arm trains only that run, and two ablations that share a run share its
directory. A nested field is named with a dot: `reward.code_mode`.

Summary per arm over its seeds: mean final and best held-out avg@k, and a 95% confidence interval of the
mean final avg@k, mean ± t(0.975, n−1)·s/√n (Student's t; n = 1 has no interval).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
import typing
from typing import Any

from tasks.config_checks import ConfigError
from tasks.training.config import RLConfig

# Student's t quantile t(0.975, df) for the 95% interval of a mean over df + 1 seeds
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         15: 2.131, 20: 2.086, 30: 2.042}


def t975(df: int) -> float:
    """t(0.975, df): exact for the tabulated df, the next smaller tabulated df otherwise (wider, safe);
    1.96 beyond 30."""
    if df > 30:
        return 1.96
    return _T975[max(d for d in _T975 if d <= df)]


def arms(vary: dict[str, list]) -> list[dict[str, Any]]:
    """Every combination of the varied values, the first field varying slowest."""
    if not vary:
        return [{}]
    names = list(vary)
    return [dict(zip(names, combo)) for combo in itertools.product(*(vary[n] for n in names))]


def label(arm: dict[str, Any]) -> str:
    """`loss=gppo,sft_alpha=0.1` (the arm's overrides in order); `base` for the unchanged config."""
    return ",".join(f"{k}={v}" for k, v in arm.items()) or "base"


def _field_type(cls: type, name: str) -> Any:
    hints = typing.get_type_hints(cls)
    if name not in hints:
        raise ConfigError(name, f"is not a setting of {cls.__name__}")
    kind = hints[name]
    if typing.get_origin(kind) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    return kind


def parse_value(cls: type, name: str, text: str) -> Any:
    """A value written on the command line, as field `name` (dotted for nested configs) of `cls` types it:
    `0.1` → 0.1, `true`/`false` → bool, `none` → None, `math,code` stays text for tuples (split by `|`)."""
    head, _, rest = name.partition(".")
    if rest:
        return parse_value(_field_type(cls, head), rest, text)
    kind = _field_type(cls, name)
    if text.strip().lower() == "none":
        return None
    try:
        if kind is bool:
            if text.strip().lower() not in ("true", "false", "1", "0", "on", "off"):
                raise ValueError
            return text.strip().lower() in ("true", "1", "on")
        if kind in (int, float):
            return kind(text)
        if typing.get_origin(kind) is tuple:
            return tuple(x.strip() for x in text.split("|") if x.strip())
    except ValueError:
        raise ConfigError(name, f"expects {getattr(kind, '__name__', kind)}, got {text!r}") from None
    return text


def arm_config(base: RLConfig, arm: dict[str, Any], seed: int) -> RLConfig:
    """`base` with the arm's overrides and the seed; the result checks itself (a bad value names its field)."""
    top: dict[str, Any] = {"seed": seed}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in arm.items():
        head, _, rest = name.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            top[name] = value
    for head, values in nested.items():
        try:
            top[head] = dataclasses.replace(getattr(base, head), **values)
        except ConfigError as e:
            raise e.within(head) from None
        except TypeError:
            raise ConfigError(head, f"has no setting {', '.join(values)}") from None
    try:
        return dataclasses.replace(base, **top)
    except TypeError as e:
        raise ConfigError(next(iter(arm), "vary"), f"is not an RL setting ({e})") from None


TRAINING_FIGURES = ("clip_frac_low", "clip_frac_high", "entropy")  # per-step metrics averaged per run


def training_figures(metrics: list[dict]) -> dict[str, float | None]:
    """A run's mean over its steps of each TRAINING_FIGURES metric (token fractions in the low / high clip
    region, token entropy), over the steps that trained (trained_rollouts > 0); None when none did."""
    trained = [m for m in metrics if m.get("trained_rollouts", 1) > 0]
    return {k: statistics.fmean(m[k] for m in trained) if trained else None for k in TRAINING_FIGURES}


def mean_ci95(values: list[float]) -> tuple[float | None, float | None]:
    """(mean, half-width of its 95% t interval): (None, None) without values, (mean, None) with one."""
    if not values:
        return None, None
    half = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return statistics.fmean(values), half


def summarize(runs: list[dict]) -> list[dict]:
    """One row per arm (in first-seen order): seeds, mean final / best avg@k each with its 95% interval, and
    the mean over seeds of each run's TRAINING_FIGURES (when the runs carry them)."""
    table = []
    for arm in dict.fromkeys(r["arm"] for r in runs):
        mine = [r for r in runs if r["arm"] == arm]
        final, final_ci = mean_ci95([r["final_avg_at_k"] for r in mine if r["final_avg_at_k"] is not None])
        best, best_ci = mean_ci95([r["best_avg_at_k"] for r in mine if r["best_avg_at_k"] is not None])
        row = {"arm": arm, "seeds": len(mine), "final_avg_at_k": final, "final_ci95": final_ci,
               "best_avg_at_k": best, "best_ci95": best_ci}
        for k in TRAINING_FIGURES:
            values = [r[k] for r in mine if r.get(k) is not None]
            row[k] = statistics.fmean(values) if values else None
        table.append(row)
    return table

"""Ablations over RL settings: arms, their configs, content-addressed run directories, and the summary.

An ablation varies one or more RLConfig fields over values (`{"loss": ["gppo", "grpo"], "sft_alpha":
[0, 0.1]}` → 4 arms, the cartesian product in the given order) and trains every arm once per seed from the
same model on the same data. A run's directory is keyed by what determines its result — the model's
checkpoint id, the data, the arm's full config (seed included) and the training code — so a rerun trains
nothing, an added seed or arm trains only that run, and two ablations that share a run share its
directory. A nested field is named with a dot: `reward.code_mode`.

A run's held-out curve is avg@k at step 0 (the starting policy) and every `eval_every` steps. Its figures:
final (last step), best (over the trained steps), gain = final − step 0, and the area under the curve as
the curve's mean height, AUC = Σ_i (s_i − s_{i−1})·(y_i + y_{i−1})/2 / (s_last − s_0) (trapezoids), which
rewards learning early and staying there. Summary per arm over its seeds: the mean of each figure with a
95% confidence interval, mean ± t(0.975, n−1)·s/√n (Student's t; n = 1 has no interval). Two arms are
separated at 95% when Welch's t-test on their seeds' AUCs gives p < 0.05 (unequal variances; the
difference's interval uses the Welch–Satterthwaite degrees of freedom).
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import statistics
import typing
from typing import Any

from tasks.config_checks import ConfigError
from tasks.stats import mean_ci95, welch
from tasks.training.config import RLConfig

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


def repeated_run(plan: list[tuple[dict[str, Any], int, RLConfig]]) -> str | None:
    """What an ablation's (arm, seed, config) plan runs twice, in words, or None: a seed or an arm given twice
    (or one arm's value written two ways) would count one run twice in its arm's mean and interval."""
    seen: dict[str, tuple[dict[str, Any], int]] = {}
    for arm, seed, cfg in plan:
        key = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str)
        if key in seen:
            first, first_seed = seen[key]
            return f"arm {label(arm)} with seed {seed} is the run of arm {label(first)} with seed {first_seed}"
        seen[key] = (arm, seed)
    return None


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


# per-step metrics averaged per run (over the steps that trained)
TRAINING_FIGURES = ("clip_frac_low", "clip_frac_high", "entropy", "grad_share_low", "grad_share_high",
                    "stale_logratio", "grad_norm", "grad_norm_max")
RUN_FIGURES = ("initial_avg_at_k", "final_avg_at_k", "best_avg_at_k", "gain", "auc")  # from the held-out curve


def training_figures(metrics: list[dict]) -> dict[str, float | None]:
    """A run's mean over its steps of each TRAINING_FIGURES metric, over the steps that trained
    (trained_rollouts > 0; step 0's row holds only the starting held-out figure); None when none did."""
    trained = [m for m in metrics if m.get("trained_rollouts", 0) > 0]
    return {k: statistics.fmean(m[k] for m in trained if k in m) if any(k in m for m in trained) else None
            for k in TRAINING_FIGURES}


def held_out_curve(metrics: list[dict]) -> list[tuple[int, float]]:
    """(step, held-out avg@k) of every row that has one, by step: step 0 is the starting policy."""
    return sorted((m["step"], m["eval_avg_at_k"]) for m in metrics if "eval_avg_at_k" in m)


def area_under_curve(curve: list[tuple[int, float]]) -> float | None:
    """The curve's mean height by trapezoids over its steps (module docstring); None under two points."""
    if len(curve) < 2 or curve[-1][0] == curve[0][0]:
        return None
    area = sum((s1 - s0) * (y0 + y1) / 2 for (s0, y0), (s1, y1) in zip(curve, curve[1:]))
    return area / (curve[-1][0] - curve[0][0])


def run_figures(metrics: list[dict]) -> dict[str, float | None]:
    """RUN_FIGURES of one run from its metrics rows (None where the curve lacks the point)."""
    curve = held_out_curve(metrics)
    start = curve[0][1] if curve and curve[0][0] == 0 else None
    trained = [y for s, y in curve if s > 0]
    final = trained[-1] if trained else None
    return {"initial_avg_at_k": start, "final_avg_at_k": final, "best_avg_at_k": max(trained) if trained else None,
            "gain": final - start if final is not None and start is not None else None,
            "auc": area_under_curve(curve)}


def summarize(runs: list[dict]) -> list[dict]:
    """One row per arm (in first-seen order): seeds, the mean of each RUN_FIGURES figure with its 95% interval
    (`<figure>_ci95`), and the mean over seeds of each run's TRAINING_FIGURES (when the runs carry them)."""
    table = []
    for arm in dict.fromkeys(r["arm"] for r in runs):
        mine = [r for r in runs if r["arm"] == arm]
        row: dict[str, Any] = {"arm": arm, "seeds": len(mine)}
        for k in RUN_FIGURES:
            row[k], row[k.replace("_avg_at_k", "") + "_ci95"] = mean_ci95([r[k] for r in mine if r.get(k) is not None])
        for k in TRAINING_FIGURES:
            values = [r[k] for r in mine if r.get(k) is not None]
            row[k] = statistics.fmean(values) if values else None
        table.append(row)
    return table


def pairwise(runs: list[dict], figure: str = "auc") -> list[dict]:
    """Every pair of arms (in first-seen order) compared on `figure` over their seeds by Welch's t-test:
    {a, b, diff, low, high, p, separated} (separated: p < 0.05); pairs without two seeds each are left out."""
    by_arm: dict[str, list[float]] = {}
    for r in runs:
        if r.get(figure) is not None:
            by_arm.setdefault(r["arm"], []).append(r[figure])
    out = []
    for a, b in itertools.combinations(by_arm, 2):
        if (w := welch(by_arm[a], by_arm[b])) is not None:
            out.append({"a": a, "b": b, **w, "separated": w["p"] < 0.05})
    return out


def pair_line(pair: dict, figure: str = "auc") -> str:
    """`gppo vs grpo: AUC +0.031 [-0.012, +0.074], p=0.140: not separated at 95%`."""
    verdict = "separated" if pair["separated"] else "not separated"
    return (f"{pair['a']} vs {pair['b']}: {figure} {pair['diff']:+.3f} [{pair['low']:+.3f}, {pair['high']:+.3f}], "
            f"p={pair['p']:.3f}: {verdict} at 95%")


def ablation_markdown(table: list[dict], pairs: list[dict], k: int, seeds: list[int]) -> str:
    """The summary as markdown: one row per arm (each figure a mean over seeds ± its 95% interval), then one
    line per pair of arms (pair_line)."""
    def fig(value, ci=None, fmt=".3f"):
        return "—" if value is None else f"{value:{fmt}}" + (f" ± {ci:.3f}" if ci is not None else "")

    head = ("| arm | step 0 | final | best | gain | AUC | grad share low-clip | grad share high-clip | entropy "
            "| stale \\|log δ\\| | grad norm max |\n|" + "---|" * 11 + "\n")
    rows = "".join(
        f"| `{r['arm']}` | {fig(r['initial_avg_at_k'], r['initial_ci95'])} | {fig(r['final_avg_at_k'], r['final_ci95'])} "
        f"| {fig(r['best_avg_at_k'], r['best_ci95'])} | {fig(r['gain'], r['gain_ci95'], '+.3f')} "
        f"| {fig(r['auc'], r['auc_ci95'])} | {fig(r['grad_share_low'], fmt='.4f')} | {fig(r['grad_share_high'], fmt='.4f')} "
        f"| {fig(r['entropy'])} | {fig(r['stale_logratio'], fmt='.4f')} | {fig(r['grad_norm_max'], fmt='.2f')} |\n"
        for r in table)
    title = f"Held-out avg@{k}, mean over seeds {', '.join(map(str, seeds))} (± 95% interval)\n\n"
    return title + head + rows + "\n" + "".join(f"- {pair_line(p)}\n" for p in pairs)

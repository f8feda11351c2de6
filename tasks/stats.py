"""Small-sample statistics for comparing runs over seeds: a mean's 95% interval (Student's t) and Welch's
two-sample t-test. scipy supplies the t distribution."""
from __future__ import annotations

import math
import statistics


def t975(df: float) -> float:
    """Student's t quantile t(0.975, df): the half-width factor of a two-sided 95% interval."""
    from scipy.stats import t  # late: scipy is slow to import and only summaries need it

    return float(t.ppf(0.975, df))


def mean_ci95(values: list[float]) -> tuple[float | None, float | None]:
    """(mean, half-width of its 95% t interval): (None, None) without values, (mean, None) with one."""
    if not values:
        return None, None
    half = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return statistics.fmean(values), half


def welch(a: list[float], b: list[float]) -> dict[str, float] | None:
    """Welch's two-sample t-test of mean(a) − mean(b): the difference, its 95% interval and the two-sided
    p-value; None when either side has fewer than two values. Equal values on both sides (zero variance)
    give p = 1 when the means are equal, else p = 0."""
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy.stats import t  # late: see t975

    diff = statistics.fmean(a) - statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return {"diff": diff, "low": diff, "high": diff, "p": 1.0 if diff == 0 else 0.0}
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = float(t.ppf(0.975, df)) * se
    return {"diff": diff, "low": diff - half, "high": diff + half, "p": float(2 * t.sf(abs(diff) / se, df))}

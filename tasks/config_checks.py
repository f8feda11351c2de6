"""Checks shared by the config types (SFT, RL, eval, difficulty, pipeline), so the CLI and a deployment's
parameters are refused with the same one-line message before any work starts:

    check_int(cfg, "epochs", low=1)  ->  ConfigError: "epochs (--epochs) must be at least 1 (got 0)"

The message names the config field (what a deployment's `--param config=...` sets) and its flag (what
`klear` takes).
"""
from __future__ import annotations

import math
from typing import Any


# The pydantic config of every settings dataclass (`__pydantic_config__ = STRICT_KEYS`, a plain dict: no
# pydantic import here): a deployment's parameters, validated as the config's type, refuse a key that is no
# field instead of dropping it (a misspelt `max_step` would otherwise train the default epochs in silence);
# the JSON schema the deployment form and the server check gets `additionalProperties: false` from it.
STRICT_KEYS = {"extra": "forbid"}


def error_line(e: BaseException, limit: int = 160) -> str:
    """An exception as one line for a message: its type and the first `limit` characters of its first line."""
    text = (str(e).strip().splitlines() or [""])[0][:limit]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class ConfigError(ValueError):
    """A config value out of range or unknown: `field` names it, `detail` says what is wrong, `flag` the
    command-line flag that sets it (None: derived from the field; "": none — a setting only a config file or
    a deployment's parameters reach)."""

    def __init__(self, field: str, detail: str, flag: str | None = None):
        self.field, self.detail, self._flag = field, detail, flag
        super().__init__(self.message)

    @property
    def flag(self) -> str:
        """`eps_high` → `--eps-high`; a nested config's field `reward.code_mode` → `--reward-code-mode`."""
        if self._flag is not None:
            return self._flag
        return "--" + self.field.replace(".", "-").replace("_", "-")

    @property
    def message(self) -> str:
        return f"{self.field} ({self.flag}) {self.detail}" if self.flag else f"{self.field} {self.detail}"

    def within(self, parent: str, flag: str | None = None) -> "ConfigError":
        """The same error for a config nested in field `parent` of another config (`flag` as above)."""
        return ConfigError(f"{parent}.{self.field}", self.detail, flag)

    def __str__(self) -> str:
        return self.message


def check_int(cfg: Any, name: str, low: int, high: int | None = None, optional: bool = False) -> None:
    value = getattr(cfg, name)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, f"must be an integer (got {value!r})")
    if value < low:
        raise ConfigError(name, f"must be at least {low} (got {value})")
    if high is not None and value > high:
        raise ConfigError(name, f"must be at most {high} (got {value})")


MAX_SEED = (1 << 63) - 1  # torch.manual_seed and the samplers take a signed 64-bit seed


def check_seed(cfg: Any, name: str = "seed") -> None:
    """The one rule for every seed: an integer in [0, MAX_SEED]. A larger one passes a lower bound alone and
    fails deep in the work (torch.manual_seed's "Overflow when unpacking long long"), after output exists."""
    check_int(cfg, name, 0, high=MAX_SEED)


def finite_problem(value: Any) -> str | None:
    """The one rule for every float setting, whichever way it comes (a flag, a config file, a deployment's
    parameters): NaN, +inf and -inf are refused. No range check can do it: NaN compares false with every
    bound (`nan < 0` and `nan > 1` are both False), and infinity passes a bound on one side; a run would
    then train into NaN weights, sample at no temperature or plan memory for a GPU of NaN GiB.

        finite_problem(nan) -> "must be a finite number (got nan)";  finite_problem(0.5) -> None

    Only a float can be non-finite: anything else is left to the field's own check (None)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number (got {value!r})"
    return None


def check_float(cfg: Any, name: str, low: float | None = None, high: float | None = None,
                above: bool = False, optional: bool = False) -> None:
    """A finite number (`finite_problem`) in [low, high] (or (low, high] with `above`)."""
    value = getattr(cfg, name)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(name, f"must be a finite number (got {value!r})")
    if why := finite_problem(value):
        raise ConfigError(name, why)
    if low is not None and (value <= low if above else value < low):
        raise ConfigError(name, f"must be {'above' if above else 'at least'} {low} (got {value})")
    if high is not None and value > high:
        raise ConfigError(name, f"must be at most {high} (got {value})")


def check_choice(cfg: Any, name: str, known, optional: bool = False) -> None:
    """A name from a registry (policy losses, advantage estimators, backends, graders)."""
    value = getattr(cfg, name)
    if value is None and optional:
        return
    if value not in known:
        raise ConfigError(name, f"must be one of {', '.join(sorted(known))} (got {value!r})")


def check_subset(cfg: Any, name: str, known) -> None:
    """A non-empty collection of names from a registry, each once (e.g. RL's domains)."""
    value = getattr(cfg, name)
    if isinstance(value, str) or not value or any(v not in known for v in value) or len(set(value)) != len(value):
        raise ConfigError(name, f"must be a non-empty list of distinct names from {', '.join(sorted(known))} "
                                f"(got {value!r})")


def check_existing_file(cfg: Any, name: str, optional: bool = False) -> None:
    """A path (local or fsspec URL) that must exist when the config is made, not hours into the run."""
    from storage import paths

    value = getattr(cfg, name)
    if value is None and optional:
        return
    if isinstance(value, str) and value and paths.exists(value) and not paths.is_file(value):
        raise ConfigError(name, f"{value}: is a directory, not a file")
    if not isinstance(value, str) or not value or not paths.is_file(value):
        raise ConfigError(name, f"names no existing file (got {value!r})")

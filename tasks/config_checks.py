"""Range checks shared by the config types (SFT, eval, difficulty), so the CLI and a deployment's
parameters are refused with the same one-line message before any work starts.

    check_int(cfg, "epochs", low=1)  ->  ConfigError("epochs", "must be at least 1 (got 0)")
"""
from __future__ import annotations

import math
from typing import Any


class ConfigError(ValueError):
    """A config value out of range. `field` names it; the CLI shows it as the flag `--field-name`."""

    def __init__(self, field: str, detail: str):
        super().__init__(f"{field} {detail}")
        self.field, self.detail = field, detail

    @property
    def flag_message(self) -> str:
        return f"--{self.field.replace('_', '-')} {self.detail}"


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


def check_float(cfg: Any, name: str, low: float | None = None, high: float | None = None,
                above: bool = False, optional: bool = False) -> None:
    """A finite number in [low, high] (or (low, high] with `above`)."""
    value = getattr(cfg, name)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(name, f"must be a finite number (got {value!r})")
    if low is not None and (value <= low if above else value < low):
        raise ConfigError(name, f"must be {'above' if above else 'at least'} {low} (got {value})")
    if high is not None and value > high:
        raise ConfigError(name, f"must be at most {high} (got {value})")

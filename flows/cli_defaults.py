"""CLI option defaults read from the config types, so every default is written once (in the config) and
`klear <stage> --help` shows the value a run will use.

    typer.Option(default_of(SFTConfig, "epochs"), "--epochs")   # 3, as SFTConfig says
"""
from __future__ import annotations

import dataclasses
from typing import Any


def default_of(cls: type, name: str) -> Any:
    """The default of field `name` of a dataclass or pydantic model (a default factory is called)."""
    if dataclasses.is_dataclass(cls):
        f = cls.__dataclass_fields__[name]
        if f.default is not dataclasses.MISSING:
            return f.default
        if f.default_factory is not dataclasses.MISSING:
            return f.default_factory()
        raise KeyError(f"{cls.__name__}.{name} has no default")
    info = cls.model_fields[name]  # pydantic
    return info.get_default(call_default_factory=True)

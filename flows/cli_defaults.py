"""CLI option defaults read from the config types, for options declared by hand (curate's, whose flags
are not the pydantic field names); the dataclass configs' options are generated (cli_config_options.py).

    typer.Option(default_of(CurateConfig, "ngram"), "--ngram")   # 9, as CurateConfig says
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

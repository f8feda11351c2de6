"""`klear … --help` shows every option name whole at any terminal width: rich panels where they fit
(flows/cli.py RICH_HELP_MIN_COLUMNS), click's plain wrapped help below that."""
import re

import click
import pytest
import typer
from typer.testing import CliRunner

from flows.cli import RICH_HELP_MIN_COLUMNS, app, fit_help_to_terminal


def _commands():
    root = typer.main.get_command(app)
    out = []
    for name, cmd in root.commands.items():
        subs = cmd.commands.items() if isinstance(cmd, click.Group) else [(None, cmd)]
        out += [([name] + ([sub] if sub else []), c) for sub, c in subs]
    return out


@pytest.mark.parametrize("columns", [60, 80, RICH_HELP_MIN_COLUMNS])
def test_every_option_name_is_shown_whole(columns):
    mode = fit_help_to_terminal(columns)
    assert mode == ("rich" if columns >= RICH_HELP_MIN_COLUMNS else "plain")
    try:
        for words, cmd in _commands():
            r = CliRunner().invoke(app, words + ["--help"], env={"COLUMNS": str(columns)}, terminal_width=columns)
            assert r.exit_code == 0, (words, r.output)
            assert not re.search(r"--[\w-]*…", r.output), (words, columns, re.findall(r"--[\w-]*…", r.output))
            names = [o for p in cmd.params for o in p.opts + p.secondary_opts if o.startswith("--")]
            missing = [n for n in names if n not in r.output]
            assert not missing, (words, columns, missing)
    finally:
        fit_help_to_terminal(200)


def test_eval_help_says_it_records_only_with_a_store():
    """`klear eval` records nothing without --store (no default store, unlike the commands that write one)."""
    r = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "200"}, terminal_width=200)
    text = " ".join(r.output.replace("│", " ").split())
    assert r.exit_code == 0 and "without it nothing is recorded" in text, r.output
    assert "$KLEAR_STORE" not in text.split("--store", 1)[1].split("--", 1)[0], r.output
    curate = CliRunner().invoke(app, ["curate", "--help"], env={"COLUMNS": "200"}, terminal_width=200)
    assert "default $KLEAR_STORE or ./klear-store" in " ".join(curate.output.replace("│", " ").split())

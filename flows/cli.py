"""`klear` — the command line. Each command validates its input, then runs the stage's Prefect flow
(an ephemeral Prefect server when PREFECT_API_URL is unset, else the configured one). The commands live
in flows/cli_<group>.py; this module builds the app from them, in the order `klear --help` lists them."""
from __future__ import annotations

import shutil
import sys

import typer

from flows import cli_curate, cli_eval, cli_model, cli_pipeline, cli_rl, cli_sft, verify_cli
from flows.cli_common import (INTERRUPTED, UserError, click_exceptions, fault_line, note_interrupts,
                              prefect_env_defaults)
from flows.cli_config_options import refuse_non_finite_flags
from tasks.cpu_threads import pinned_threads

app = typer.Typer(name="klear", help="Klear-Reasoner post-training pipeline: curate, verify, SFT, RL, evaluate.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
app.command("curate")(cli_curate.curate)
app.command("demo")(cli_pipeline.demo)
app.command("sft")(cli_sft.sft)
app.command("eval")(cli_eval.eval_)
app.command("tag-difficulty")(cli_eval.tag_difficulty)
app.command("rl")(cli_rl.rl)
app.command("ablate")(cli_rl.ablate)
app.command("pipeline")(cli_pipeline.pipeline)
app.add_typer(cli_model.model_app, name="model")
verify_cli.register(app)  # verify, sandbox build|reap
refuse_non_finite_flags(app)  # every float flag refuses nan and ±inf as it is parsed, one line, exit 2

# Rich's option table (typer's help) fits a column to the longest option name by cutting it
# (`--rollouts-per-pr…`) when the terminal is narrower than the table wants; every command's names fit from
# this width on (tests/flows/test_cli_help.py checks each command at it). Narrower terminals get click's
# plain help, which wraps the descriptions instead.
RICH_HELP_MIN_COLUMNS = 120


def fit_help_to_terminal(columns: int | None = None) -> str:
    """Choose how `--help` renders for a terminal `columns` wide (default: this one, $COLUMNS first):
    "rich" (panels) where every option name fits whole, else "plain". Returns the choice."""
    columns = columns or shutil.get_terminal_size().columns
    mode = "rich" if columns >= RICH_HELP_MIN_COLUMNS else None
    for typer_app in (app, cli_model.model_app):
        typer_app.rich_markup_mode = mode
    return mode or "plain"


def main() -> None:
    # every command (`klear verify`, `klear sandbox` too), before anything (a config file's check included)
    # imports Prefect or transformers, which read these settings once, at import
    prefect_env_defaults()
    note_interrupts()
    fit_help_to_terminal()
    try:
        pinned_threads()  # KLEAR_TORCH_THREADS, read by every loop on CPU: one line before any work
    except ValueError as e:
        print(f"klear: error: {e}", file=sys.stderr)
        sys.exit(2)
    try:
        rv = app(standalone_mode=False)
        if INTERRUPTED.is_set():  # typer returns Ctrl-C's KeyboardInterrupt as a silent 130
            raise KeyboardInterrupt
    except UserError as e:
        e.show()
        sys.exit(2)
    except click_exceptions.NoArgsIsHelpError:
        sys.exit(0)  # typer has already printed the help
    except click_exceptions.UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "klear"
        print(f"{cmd}: error: {e.format_message()}", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        print("klear: aborted", file=sys.stderr)
        sys.exit(130)
    except click_exceptions.ClickException as e:
        print(f"klear: error: {e.format_message()}", file=sys.stderr)
        sys.exit(e.exit_code)
    except TimeoutError as e:  # a store's catalog lock held past the bound (storage/file_lock.py)
        print(f"klear: error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C: the work stopped (its processes with it); no traceback
        print("klear: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # a store fault or a full disk met outside a flow: one line too (cli_common)
        if (line := fault_line(e)) is None:
            raise
        UserError(line).show()
        sys.exit(2)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()

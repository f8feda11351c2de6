"""Every `klear COMMAND … --flag` written in README.md and docs/ is a flag that command takes: a user who
copies a line from the docs gets the command it describes, not "No such option"."""
import re
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[1]
COMMAND_LINE = re.compile(r"klear((?: [a-z][a-z-]*)+)([^`\n|]*)")  # `klear sub [sub] …` up to a code span's end
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def documented_flags(text: str, root) -> list[tuple[int, str, str, set[str]]]:
    """(line, command path, flag, the command's flags) for each flag after a `klear` command in `text`."""
    found = []
    for m in COMMAND_LINE.finditer(text):
        cmd, path = root, []
        words = m.group(1).split()
        for w in words:
            if w not in getattr(cmd, "commands", {}):
                break
            cmd, path = cmd.commands[w], [*path, w]
        if not path:
            continue
        taken = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        line = text[:m.start()].count("\n") + 1
        for flag in FLAG.findall(" ".join(words[len(path):]) + m.group(2)):
            found.append((line, " ".join(path), flag, taken))
    return found


def _root():
    from flows.cli import app

    return typer.main.get_command(app)


def test_documented_flags_exist():
    root = _root()
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = [(d, *f) for d in docs for f in documented_flags(d.read_text(), root)]
    assert len(checked) > 100  # the docs' examples are found at all
    unknown = [f"{d.relative_to(ROOT)}:{line}: klear {path} has no {flag}"
               for d, line, path, flag, taken in checked if flag not in taken]
    assert not unknown, "\n".join(unknown)


def test_an_unknown_flag_is_caught():
    text = "run `klear sft --max-steps 3 --no-such-flag`, then `klear model init --out d`; `klear nothing --x`"
    found = documented_flags(text, _root())
    assert [(path, flag, flag in taken) for _, path, flag, taken in found] == [
        ("sft", "--max-steps", True), ("sft", "--no-such-flag", False), ("model init", "--out", True)]

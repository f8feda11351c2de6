"""The repository stands alone: no absolute path of a developer's machine and no pointer to files outside
it, anywhere in its tracked files; and docstrings say what and why, while measurements (dated, with the
command that reproduces them) live in docs/benchmarks.md or a bench script's output."""
import ast
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MACHINE_PATHS = re.compile(r"(?<![\w.])/(work|home|Users|mnt/data)/|[A-Z]:\\\\Users\\\\")
OUTSIDE = re.compile(r"\.\./shared\b|\b(DESIGN|RECIPE|ENVIRONMENT)\.md\b")
LAB_NOTE = re.compile(r"[Mm]easured( \(|:| on | at |,|\)| [0-9~≈])|\(20\d\d-\d\d-\d\d[,)]|\bat commit\b")
THIS_FILE = Path(__file__).relative_to(ROOT).as_posix()


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [ROOT / p for p in out.decode().split("\0") if p and p != THIS_FILE]
    return [p for p in paths if p.is_file()]


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # binary data


def test_no_absolute_machine_path_and_no_pointer_outside_the_repository():
    offenders = []
    for path in _tracked():
        text = _text(path)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATHS.search(line) or OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert offenders == []


def test_docstrings_hold_no_lab_notes():
    """Dated or "measured …" figures belong in docs/benchmarks.md, next to their command."""
    offenders = []
    for path in _tracked():
        if path.suffix != ".py" or path.relative_to(ROOT).parts[0] not in ("flows", "tasks", "sandbox", "storage"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        for node in nodes:
            for line in (ast.get_docstring(node) or "").splitlines():
                if LAB_NOTE.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}: {line.strip()[:100]}")
    assert offenders == []


def test_the_checks_catch_what_they_are_for():
    assert MACHINE_PATHS.search("cd /home/alice/x") and MACHINE_PATHS.search("see /Users/bob/src")
    assert not MACHINE_PATHS.search("/tmp/run and /opt/klear/runner.py and /usr/bin/python3")
    sibling = os.path.join("..", "shared", "notes.md")  # a sibling folder of the checkout, spelled at run time
    assert OUTSIDE.search(f"read {sibling}") and not OUTSIDE.search("see docs/curation.md")
    assert LAB_NOTE.search("Measured (2026-11-30, the demo model)") and LAB_NOTE.search("measured 2.3x slower")
    assert not LAB_NOTE.search("when the caller measured it") and not LAB_NOTE.search("a cutoff `2024-08-01`")

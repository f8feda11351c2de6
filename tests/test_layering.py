"""Only flows/ and the thin task wrappers (`prefect_tasks.py`) may import Prefect; pure modules stay
importable and testable without a server. sandbox/ and storage/ must not import torch either."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mods.add(node.module.split(".")[0])
    return mods


def _py_files(*dirs: str):
    for d in dirs:
        yield from (ROOT / d).rglob("*.py")


def test_prefect_only_in_flows_and_task_wrappers():
    offenders = [str(p.relative_to(ROOT)) for p in _py_files("tasks", "sandbox", "storage")
                 if p.name != "prefect_tasks.py" and {"prefect", "prefect_dask"} & _imports(p)]
    assert offenders == []


def test_storage_and_sandbox_do_not_import_torch():
    offenders = [str(p.relative_to(ROOT)) for p in _py_files("sandbox", "storage") if "torch" in _imports(p)]
    assert offenders == []

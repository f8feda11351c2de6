"""Only flows/ and the thin task wrappers (`prefect_tasks.py`) may import Prefect; pure modules stay
importable and testable without a server. sandbox/ and storage/ must not import torch either.

Imports point down the layers of LAYERS, and no two files import each other, even
through others. Every import counts, at module level or inside a function: one inside a function still
ties the two modules together, it only hides the cycle until that function runs."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOTS = ("sandbox", "storage", "tasks", "flows")

# Bottom to top. A module may import its own package and the packages of lower layers; packages of one
# layer do not import each other (curation and verification both read rows through tasks.records).
LAYERS = [
    ("sandbox", "storage"),
    ("tasks.stats", "tasks.cpu_threads"),  # numbers only: the chart helpers beside stats draw its intervals;
    #   cpu_threads is standard library only, and the package sets OpenMP's waiting from it when imported
    ("tasks", "tasks.records", "tasks.progress", "tasks.dask_client", "tasks.process_lifetime",
     "tasks.config_checks", "tasks.reporting", "tasks.prefect_tasks"),
    ("tasks.grading",),
    ("tasks.curation", "tasks.verification"),
    ("tasks.models",),       # below generation: a generator checks the model directory before it loads it
    ("tasks.generation",),
    ("tasks.evaluation",),
    ("tasks.training",),
    ("tasks.pipeline",),
    ("flows",),
]
LAYER = {package: i for i, layer in enumerate(LAYERS) for package in layer}

# Cycles in files other work owns, each to be removed there (then its entry here).
KNOWN_CYCLES = [
]


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


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in _py_files(*ROOTS)}


def _known(name: str) -> str | None:
    """The module of ours that `import name` loads last (its longest prefix that is one of our files)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        return {m for m in map(_known, (a.name for a in node.names)) if m}
    base = node.module or ""
    if node.level:  # relative: from the package of this module, `level` - 1 packages up
        package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        package = package[:len(package) - node.level + 1]
        base = ".".join(package + ([base] if base else []))
    found = {_known(f"{base}.{a.name}") for a in node.names} | {_known(base)}
    return {m for m in found if m}


def import_graph() -> dict[str, dict[str, int]]:
    """module → {imported module of ours: line}, every import in the file (module level and in functions)."""
    graph = {}
    for module, path in MODULES.items():
        edges = {}
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, node) - {module}:
                    edges.setdefault(target, node.lineno)
        graph[module] = edges
    return graph


def _package(module: str) -> str | None:
    """The entry of LAYERS a module belongs to (its longest prefix there; `tasks` is tasks/__init__.py
    alone, so a new module directly under tasks/ must be given its layer)."""
    name = module
    while name and name not in LAYER:
        name = name.rpartition(".")[0]
    return None if not name or (name == "tasks" and module != "tasks") else name


def layering_violations(graph: dict[str, dict[str, int]]) -> list[str]:
    bad = []
    for module, edges in sorted(graph.items()):
        own = _package(module)
        for target, line in sorted(edges.items()):
            other = _package(target)
            if own is None or other is None or own == other:
                continue
            if LAYER[other] >= LAYER[own]:
                where = "the same layer as" if LAYER[other] == LAYER[own] else "a higher layer than"
                bad.append(f"{MODULES[module].relative_to(ROOT)}:{line} imports {target}: {other} is in {where} {own}")
    return bad


def import_cycles(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, cycles, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(component)
    return cycles


def test_prefect_only_in_flows_and_task_wrappers():
    offenders = [str(p.relative_to(ROOT)) for p in _py_files("tasks", "sandbox", "storage")
                 if p.name != "prefect_tasks.py" and {"prefect", "prefect_dask"} & _imports(p)]
    assert offenders == []


def test_storage_and_sandbox_do_not_import_torch():
    offenders = [str(p.relative_to(ROOT)) for p in _py_files("sandbox", "storage") if "torch" in _imports(p)]
    assert offenders == []


def test_every_module_has_a_layer():
    assert [m for m in MODULES if _package(m) is None] == []


def test_imports_point_down_the_layers():
    bad = layering_violations(import_graph())
    assert not bad, "imports that point up or sideways (tests/test_layering.py LAYERS):\n" + "\n".join(bad)


def test_no_import_cycles_between_files():
    cycles = [" ↔ ".join(sorted(c)) for c in import_cycles(import_graph()) if c not in KNOWN_CYCLES]
    assert not cycles, "files that import each other (directly or through others):\n" + "\n".join(cycles)


def test_the_checks_see_an_upward_import_and_a_cycle():
    """The rules on a graph with one old arrow put back (evaluation → training, inside a function) and the
    old generation cycle (select ↔ parallel)."""
    graph = import_graph()
    graph["tasks.evaluation.prefect_tasks"] = {**graph["tasks.evaluation.prefect_tasks"], "tasks.training.metrics": 1}
    graph["tasks.generation.parallel"] = {**graph["tasks.generation.parallel"], "tasks.generation.select": 1}
    assert any("imports tasks.training.metrics: tasks.training is in a higher layer than tasks.evaluation" in v
               for v in layering_violations(graph))
    assert {"tasks.generation.parallel", "tasks.generation.select"} in import_cycles(graph)

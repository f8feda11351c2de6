"""Assert-style tests, judged by running the test code itself in a checker that never loads the program.

A snippet such as

    def check(candidate):
        assert candidate(1, 2) == 3
        for x in range(5):
            assert candidate(x, 0) == x
    check(add)

is split, here on the host, into units the checker executes in order (sandbox/runner.py, "Assert-style"):
setup statements, and tests. A test is a top-level statement holding an assert (directly, or by calling
a function of the snippet that holds one); the other statements are setup. HumanEval's form, a
`def check(candidate)` called once as `check(NAME)`, is inlined first (`candidate = NAME`, then the body),
so each of its top-level asserts is a test of its own and the `for` loop above is one test.

A top-level `if __name__ == "__main__":` block is unwrapped first (the test code runs as the main script:
its asserts are tests like any others).

The checker runs the units in one namespace: the test code's own names, LiveCodeBench's import header and
the builtins are the checker's; every other name is looked up in the program's process, and calls travel
there and back as plain data (a header name the test code uses as a helper next to the function under
test, such as `isclose`, is the header's: sandbox/runner.py _TestGlobals). A test passes when its unit
runs to the end having run at least one assert; an assert that does not hold, or a unit that ran none, is
a wrong answer, an exception is a runtime error. A setup statement that raises fails every test after it.
Each test is one scored test (`count_tests` counts them).

A snippet that cannot be judged is refused (InvalidTests, `invalid_tests`): it does not compile, it has no
test, or it never uses a name the program defines (it would pass or fail whatever the program does).
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

MAX_SNIPPET_CHARS = 200_000
SETUP, TEST = "setup", "test"


class UnjudgeableAssert(ValueError):
    """The snippet cannot be judged; the message says why."""


class NoAssert(UnjudgeableAssert):
    """The snippet holds no assert (setup only): it tests nothing."""


@dataclass(frozen=True)
class AssertTest:
    """One scored test: unit `unit` of snippet `snippet` (the index among that snippet's tests)."""

    snippet: int
    unit: int
    source: str  # the statement's text, for messages


@dataclass(frozen=True)
class Call:
    """A test of the plain form `assert F(literals) == literal` (or `assert F(literals)`, `assert not
    F(...)`): the program calls F itself and reports the value; the host compares (`check`: "eq", "true",
    "false")."""

    name: str
    args: tuple
    expected: object = None
    check: str = "eq"

    def holds(self, value) -> bool:
        """Python's own `==` / truth on the value rebuilt from plain data (never the program's objects:
        a value it could only describe is equal to nothing and has no truth)."""
        from sandbox.compare import Opaque

        if isinstance(value, Opaque):
            return False
        try:
            return bool(value == self.expected) if self.check == "eq" else bool(value) is (self.check == "true")
        except Exception:
            return False


@dataclass(frozen=True)
class Snippet:
    """A snippet as the checker runs it: (kind, source) units in order. When every test is a plain call
    (`calls`), the program runs the calls itself and no checker is needed: the same verdicts, one process
    fewer per run."""

    units: tuple[tuple[str, str], ...]
    calls: tuple[Call, ...] | None = None
    free: tuple[str, ...] = ()  # the names it uses and does not bind (program_names): the checker's header rule
    tested: tuple[str, ...] = ()  # the free names it calls as the function under test (tested_names): never a header helper

    @property
    def tests(self) -> int:
        return sum(kind == TEST for kind, _ in self.units)


def _is_main_guard(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":` (either order, no else)."""
    if not isinstance(stmt, ast.If) or stmt.orelse or not isinstance(stmt.test, ast.Compare):
        return False
    test = stmt.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = {ast.dump(test.left), ast.dump(test.comparators[0])}
    return sides == {ast.dump(ast.Name(id="__name__", ctx=ast.Load())), ast.dump(ast.Constant(value="__main__"))}


def _unwrap_main_guard(tree: ast.Module) -> ast.Module:
    """A top-level `if __name__ == "__main__":` block's statements in its place: test code run as the main
    script runs them, and each of their asserts is a test of its own."""
    body: list[ast.stmt] = []
    for s in tree.body:
        body.extend(s.body if _is_main_guard(s) else [s])
    tree.body = body
    return tree


def _inline_check(tree: ast.Module) -> ast.Module:
    """`def F(p1, ...)` holding an assert, called exactly once at top level as `F(a1, ...)` with plain
    positional arguments -> `p1 = a1` ..., then F's body in place of the call (HumanEval's check)."""
    defs = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    calls: dict[str, list[ast.Expr]] = {}
    for s in tree.body:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name):
            calls.setdefault(s.value.func.id, []).append(s)

    def inlinable(fn: ast.FunctionDef) -> bool:
        a, found = fn.args, calls.get(fn.name, [])
        if len(found) != 1 or fn.decorator_list or a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            return False
        call = found[0].value
        if call.keywords or len(call.args) != len(a.args) or any(isinstance(x, ast.Starred) for x in call.args):
            return False
        banned = (ast.Return, ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)
        top = [n for stmt in fn.body for n in ast.walk(stmt)]
        return any(isinstance(n, ast.Assert) for n in top) and not any(isinstance(n, banned) for n in top)

    body: list[ast.stmt] = []
    for s in tree.body:
        if isinstance(s, ast.FunctionDef) and s.name in defs and inlinable(s):
            continue  # its body goes where it is called
        fn = None
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name):
            fn = defs.get(s.value.func.id)
        if fn is not None and inlinable(fn):
            for param, arg in zip(fn.args.args, s.value.args):
                body.append(ast.Assign(targets=[ast.Name(id=param.arg, ctx=ast.Store())], value=arg,
                                       lineno=s.lineno))
            body.extend(fn.body)
            continue
        body.append(s)
    tree.body = body
    return ast.fix_missing_locations(tree)


def _asserting_functions(tree: ast.Module) -> set[str]:
    """Names of the snippet's top-level functions that hold an assert (or call one that does)."""
    defs = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found = {n for n, fn in defs.items() if any(isinstance(x, ast.Assert) for x in ast.walk(fn))}
    while True:
        more = {n for n, fn in defs.items() if n not in found and any(
            isinstance(x, ast.Name) and x.id in found for x in ast.walk(fn))}
        if not more:
            return found
        found |= more


def _is_test(stmt: ast.stmt, asserting: set[str]) -> bool:
    """A statement holding an assert (or a call of a snippet function that holds one) and using some
    name beyond the builtins: `assert True` or `assert 1 + 1 == 2` tests nothing of the program, so it
    is setup (a false one then fails every test after it)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    if not any(isinstance(n, ast.Name) and not hasattr(builtins, n.id) for n in ast.walk(stmt)):
        return False
    for node in ast.walk(stmt):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in asserting:
            return True
    return False


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the snippet binds anywhere (assignments, defs, imports, loop and comprehension
    targets, parameters, except-as), so what it loads and never binds comes from outside it."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
    return bound


def program_names(tree: ast.Module, header: frozenset[str] = frozenset()) -> set[str]:
    """Names the snippet uses but neither binds nor gets from the builtins or `header`: the program's
    (and `solution`, when the snippet imports the program's module by that name)."""
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    found = {n for n in loaded - _bound_names(tree) if not hasattr(builtins, n) and n not in header}
    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and node.module == "solution" and not node.level) or (
                isinstance(node, ast.Import) and any(a.name == "solution" for a in node.names)):
            found.add("solution")
    return found


def split_snippet(code: str, header: frozenset[str] = frozenset()) -> Snippet:
    """The checker's units for one snippet. Raises UnjudgeableAssert. `header`: names that LiveCodeBench's
    header defines (they do not count as the program's; the program may still define them)."""
    if len(code) > MAX_SNIPPET_CHARS:
        raise UnjudgeableAssert(f"snippet longer than {MAX_SNIPPET_CHARS} characters")
    try:
        tree = ast.parse(code)
        compile(code, "<tests>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise UnjudgeableAssert(f"does not compile: {exc}") from None
    tree = _inline_check(_unwrap_main_guard(tree))
    asserting = _asserting_functions(tree)
    units = tuple((TEST if _is_test(s, asserting) else SETUP, ast.unparse(s)) for s in tree.body)
    if not any(isinstance(n, ast.Assert) for n in ast.walk(tree)):
        raise NoAssert("no assert")
    if not any(kind == TEST for kind, _ in units):
        raise UnjudgeableAssert("no assert that tests the program (an assert must use a name beyond the "
                                "builtins, in a top-level statement or a function the snippet calls)")
    names = program_names(tree, header)
    if not names:
        raise UnjudgeableAssert("never uses a name the program defines: it tests nothing of the program")
    return Snippet(units, plain_calls(tree, names), tuple(sorted(names)), tuple(sorted(tested_names(tree, names))))


def tested_names(tree: ast.Module, free: set[str]) -> set[str]:
    """Free names the test code calls as the function under test; the checker keeps them the program's even
    where LiveCodeBench's header offers one (sandbox/runner.py header_helpers), so a program's own `factorial`
    is the one judged, never the header's. Where a call could be either the function under test or a helper,
    it is a helper: a helper taken for the program's would let a program that redefines it (`isclose`,
    `sqrt`) judge itself, and fail an honest one that never binds it.

    A call `N(args)` of a free name tests N when its arguments hold no value of the program's (no free name,
    no name bound to what the program returned, no call of a function of the snippet's) and it is an
    assert's subject:

    - the assert's whole test, the operand of `not`, an operand of `and`, or a side of a comparison whose
      other sides call no free name but N;
    - seen through what only carries its value, whose other parts call no free name but N: builtins (`str`,
      `abs`, `sorted`), arithmetic, a list, tuple or set display, an index or attribute (`assert abs(add(2, 3)
      - 5) < 1e-9`, `assert (add(2, 3), add(1, 1)) == (5, 2)`, `assert factorial(5) == 5 * factorial(4)`);
    - through a name bound once at top level, to the call's value (`r = add(2, 3)`, then `assert r == 5`) or to
      the function itself (`f = add`, HumanEval's `candidate = add`, then `assert f(2, 3) == 5`).

    A free name passed alone to a function of the snippet's (HumanEval's `check(add)`, called more than once)
    is tested too. Helpers stay the header's: `sqrt` in `assert f(2) == sqrt(4)`, `abs(f(2) - sqrt(2)) <
    1e-9` and `expected = sqrt(4)` facing `f(2)`; `isclose` in `isclose(f(x), 2.5)` and in `r = f(2)`, `assert
    isclose(r, 2.5)`; a header constructor of the arguments (`f(deque([1, 2]))`); anything inside a
    comprehension or lambda."""
    program = set(free) | {(a.asname or a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                           and n.module == "solution" and not n.level for a in n.names}
    own_functions = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                       ast.ClassDef))}
    assigned: dict[str, list[ast.expr]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            assigned.setdefault(stmt.targets[0].id, []).append(stmt.value)
    once = {n: v[0] for n, v in assigned.items() if len(v) == 1 and n not in free}
    aliases = {n: v.id for n, v in once.items() if isinstance(v, ast.Name) and v.id in free}
    values = {n: v for n, v in once.items() if n not in aliases}
    derived = _program_values(tree, program | set(aliases), own_functions)

    def callee(node: ast.AST) -> str | None:  # the free name a call calls, through an alias
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = aliases.get(node.func.id, node.func.id)
            return name if name in free else None
        return None

    def holds_program_value(node: ast.AST) -> bool:
        return any((isinstance(n, ast.Name) and n.id in derived)
                   or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in own_functions)
                   for n in ast.walk(node))

    def called(node: ast.AST, seen: frozenset = frozenset()) -> set[str]:  # free names it calls, through names
        found = set()
        for n in ast.walk(node):
            if name := callee(n):
                found.add(name)
            elif isinstance(n, ast.Name) and n.id in values and n.id not in seen:
                found |= called(values[n.id], seen | {n.id})
        return found

    def subjects(node: ast.expr, seen: frozenset = frozenset()) -> set[str]:
        name = callee(node)
        if name is not None:
            args = [*node.args, *(k.value for k in node.keywords)]
            return set() if any(holds_program_value(a) for a in args) else {name}
        if isinstance(node, ast.Name) and node.id in values and node.id not in seen:
            return subjects(values[node.id], seen | {node.id})
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and hasattr(builtins, node.func.id)
                and node.func.id not in own_functions and node.func.id not in derived):
            return facing([*node.args, *(k.value for k in node.keywords)], seen)
        if isinstance(node, ast.BinOp):
            return facing([node.left, node.right], seen)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return facing(list(node.elts), seen)
        if isinstance(node, ast.UnaryOp):
            return subjects(node.operand, seen)
        if isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
            return subjects(node.value, seen)
        return set()

    def facing(parts: list[ast.expr], seen: frozenset = frozenset()) -> set[str]:
        """The subjects N of each part (a comparison's side, an operand, an argument of a builtin) whose other
        parts call no free name but N."""
        found: set[str] = set()
        for i, part in enumerate(parts):
            others = set().union(*(called(o) for o in parts[:i] + parts[i + 1:]))
            found |= {n for n in subjects(part, seen) if others <= {n}}
        return found

    def tested_by(test: ast.expr) -> set[str]:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return tested_by(test.operand)
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return set().union(*(tested_by(v) for v in test.values))
        return facing([test.left, *test.comparators] if isinstance(test, ast.Compare) else [test])

    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            found |= tested_by(node.test)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in own_functions
              and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Name)):
            found |= {aliases.get(node.args[0].id, node.args[0].id)} & set(free)
    return found


def _program_values(tree: ast.Module, program: set[str], own_functions: set[str]) -> set[str]:
    """The names that may hold what the program made: `program` (its names, their aliases) and every name the
    snippet binds otherwise than to a value of its own making — an assignment or `for` target whose value
    uses such a name or calls a free or snippet function, and whatever a parameter, `with`, `except`,
    comprehension or walrus binds (not followed: taken as the program's). Imports and the snippet's own
    functions are not values."""
    def pure(node: ast.AST, derived: set[str]) -> bool:
        for n in ast.walk(node):
            if isinstance(n, (ast.Lambda, ast.comprehension, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                return False
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in derived:
                return False
            if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and hasattr(builtins, n.func.id)
                                                and n.func.id not in own_functions):
                return False
        return True

    bindings: list[tuple[list[str], ast.AST | None]] = []  # (names bound, the value they are bound from)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            value = node.value if not isinstance(node, ast.AugAssign) else ast.BinOp(node.target, node.op, node.value)
            bindings.append((names, value))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            bindings.append(([n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)], node.iter))
    assigned = {n for names, _ in bindings for n in names}
    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    derived = set(program) | (_bound_names(tree) - assigned - imported - own_functions)
    changed = True
    while changed:
        changed = False
        for names, value in bindings:
            if value is not None and not set(names) <= derived and not pure(value, derived):
                derived |= set(names)
                changed = True
    return derived


def _literal(node: ast.expr):
    value = ast.literal_eval(node)  # ValueError, TypeError, SyntaxError, MemoryError, RecursionError
    if isinstance(value, float) and value != value:
        raise ValueError("nan")
    return value


def plain_calls(tree: ast.Module, names: set[str]) -> tuple[Call, ...] | None:
    """The snippet as plain calls, or None. Plain: every statement is an alias `X = F` of a program name
    or a test `assert F(lit, ...) == lit` (either side), `assert F(lit, ...)` or `assert not F(...)`, F a
    program name (or an alias of one), with no message and nothing else evaluated."""
    aliases, calls = {}, []
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Name) and stmt.value.id in names | set(aliases)):
            aliases[stmt.targets[0].id] = aliases.get(stmt.value.id, stmt.value.id)
            continue
        if not isinstance(stmt, ast.Assert) or stmt.msg is not None:
            return None
        test, check, expected = stmt.test, "true", None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, check = test.operand, "false"
        elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            left, right = test.left, test.comparators[0]
            test, other = (left, right) if isinstance(left, ast.Call) else (right, left)
            check = "eq"
            try:
                expected = _literal(other)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and not test.keywords):
            return None
        name = aliases.get(test.func.id, test.func.id)
        if name not in names or test.func.id in _bound_names(tree) - set(aliases):
            return None
        try:
            args = tuple(_literal(a) for a in test.args)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
        calls.append(Call(name, args, expected, check))
    return tuple(calls) if calls else None

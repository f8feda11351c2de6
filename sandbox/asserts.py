"""Assert-style tests judged outside the program's trust: each assert becomes observations + a host check.

The program under test shares its process with whatever runs there, so nothing that runs there may
decide pass/fail or see an expected value. A test snippet such as

    s = Solution()
    assert s.add(1, 2) == 3, "add"
    assert math.isclose(s.div(1, 3), 0.3333, rel_tol=1e-3)

is split, here on the host, into
- a program for the sandbox, with every assert replaced by its observations (the sub-expressions that
  need the program), each reported as plain data:

      s = Solution()
      __observe__(0, lambda: s.add(1, 2))
      __observe__(1, lambda: s.div(1, 3))

- one host-side check per assert, over the observed values (o0, o1: the observations, named
  `__klear_o0`, `__klear_o1` in the check's source): `o0 == 3`, `math.isclose(o1, 0.3333, rel_tol=0.001)`.

Expected values, assert messages and the comparison itself never enter the container. The host
evaluates a check with its own small interpreter (`evaluate_check`), never `eval`, over a fixed set of
pure operations: literals, comparisons (== != < <= > >= is, is not, in, not in), and/or/not, + - * / // %
** on numbers (bounded), + and * on strings, lists and tuples, set difference, the checks in HOST_CHECKS,
conversions of constants (CONVERSIONS) and str/set predicate methods (HOST_PREDICATE_METHODS). A value
the runner could only describe (an object that is not plain data) is Opaque: any operation on it fails
the check, so an object whose __eq__ is always True, or an int subclass, gains nothing.

What becomes an observation: each maximal sub-expression that the host cannot evaluate (a call of the
program's functions, a name from the snippet, an attribute...). A snippet is refused (InvalidTests,
`invalid_tests` at curation) when judging it would need the program's trust:
- an assert that is not a top-level statement (inside a def, loop, if, with, try): its check would run
  in the program's process. A `def check(candidate)` whose body is top-level asserts, called once as
  `check(NAME)`, is inlined first (HumanEval's form).
- an observed expression that itself compares or decides (contains a comparison, and/or, `if`-expression,
  lambda or comprehension): the decision would be made in the program's process.
- two values that both need the program combined by a comparison, arithmetic or a host function
  (`f(1) == expected_from_setup`, `abs(f(3) - ref(3)) < 1e-6`): the expected side would come from the
  program's process, which can report any two values that agree.
- a test value handed to code that is not the program's inside an observation (`operator.eq(f(), 42)
  == 1`, a snippet lambda `close(f(1), 0.5)`, `max(f(), 5)`), and an observation whose truth is the verdict
  (`assert X`, `not X`, `X == True`) unless X is a call of the program's own code; a method of a value a
  function returned (`f(x).equals([1, 2])`) must be compared with a literal that is not bool-like.
  Conversions of program values (`list(gen())`, `sorted(f(), key=len)`) run inside the observation.
Asserts without any observation (`assert True, "marker"`) are no test: dropped when they hold, and the
snippet refused when they do not.

Each assert with an observation is one scored test (`count_tests` counts them). The snippet runs once;
an observation that raises is recorded as that test's error and the snippet goes on, so a wrong value
or an exception fails only its own test. A limit broken by the process (time, memory, output) fails every
test of the snippet.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

OBSERVE = "__observe__"  # bound by the runner in the snippet's namespace
OBS_PREFIX = "__klear_o"  # host-side name of observation N: __klear_oN (reserved: a snippet may not use it)
MAX_SNIPPET_CHARS = 200_000


class UnjudgeableAssert(ValueError):
    """The snippet cannot be judged outside the program's process; the message says why."""


class CheckFailed(Exception):
    """A host-side check could not be evaluated on the observed values (a type error, an Opaque value)."""


@dataclass(frozen=True)
class AssertCheck:
    """One scored test: `expr` (Python source over names __klear_o0, ...) evaluated on the host."""

    snippet: int  # which program (of TestSuite.programs) produces its observations
    expr: str  # host-side check, e.g. "__klear_o3 == [1, 2]"
    observations: tuple[int, ...]  # observation ids it reads, in evaluation order
    source: str  # the original assert, for messages (never sent to the sandbox)


# ----------------------------------------------------------------------------------- host functions
class _Sentinel:
    pass


HOST_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "tuple": tuple,
              "dict": dict, "set": set, "frozenset": frozenset, "bytes": bytes, "complex": complex}
# Checks: always evaluated on the host, over observed operands (they decide, so never in the container).
HOST_CHECKS = {
    "bool": bool, "abs": abs, "round": round, "all": all, "any": any, "isinstance": isinstance, "type": type,
    "math.isclose": math.isclose, "math.fabs": math.fabs, "math.floor": math.floor, "math.ceil": math.ceil,
    "math.sqrt": math.sqrt, "math.trunc": math.trunc, "isclose": math.isclose,
}
# Conversions: on the host when every argument is a constant (`set((4, 5))`, `float("inf")`); applied to a
# program value they run in the container as part of its observation (`list(gen())` must see the generator;
# the result is still compared with an expected value the program never saw).
CONVERSIONS = {**{k: v for k, v in HOST_TYPES.items() if k != "bool"},
               "len": len, "sorted": sorted, "min": min, "max": max, "sum": sum, "range": range}
HOST_FUNCTIONS = {**CONVERSIONS, **HOST_CHECKS}
# Predicate methods of plain values, applied on the host to an observed value (`f(x).startswith("ab")`):
# in the container, a str subclass would answer True to anything.
HOST_PREDICATE_METHODS = {
    **{m: (str, bytes) for m in ("startswith", "endswith", "isdigit", "isalpha", "isalnum", "isupper",
                                 "islower", "isspace", "istitle", "isascii")},
    **{m: (str,) for m in ("isdecimal", "isnumeric", "isidentifier", "isprintable")},
    **{m: (set, frozenset) for m in ("issubset", "issuperset", "isdisjoint")},
}
HOST_CONSTANTS = {"math.inf": math.inf, "math.pi": math.pi, "math.e": math.e, "math.nan": math.nan,
                  "None": None, "True": True, "False": False}
_HOST_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_SIZE_LIMIT = 1_000_000  # items or characters a host operation may build (a value cannot blow up the judge)


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _host_evaluable(node: ast.AST) -> bool:
    """True when the host can evaluate `node` by itself (observations aside) — see evaluate_check."""
    if isinstance(node, ast.Constant):
        return not isinstance(node.value, type(Ellipsis))
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_host_evaluable(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _host_evaluable(k) for k in node.keys) and all(
            _host_evaluable(v) for v in node.values)
    if _observation_id(node) is not None:
        return True  # already an observation
    name = _dotted(node)
    if name is not None:
        return name in HOST_CONSTANTS or name in HOST_TYPES
    if isinstance(node, ast.UnaryOp):
        return _host_evaluable(node.operand)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _HOST_BINOPS) and _host_evaluable(node.left) and _host_evaluable(node.right)
    if isinstance(node, ast.BoolOp):
        return all(_host_evaluable(v) for v in node.values)
    if isinstance(node, ast.Compare):
        return _host_evaluable(node.left) and all(_host_evaluable(c) for c in node.comparators)
    if isinstance(node, ast.Call):
        if not all(k.arg is not None and _host_evaluable(k.value) for k in node.keywords) or not all(
                _host_evaluable(a) for a in node.args):
            return False
        if _predicate_method(node) is not None:
            return _host_evaluable(node.func.value)
        return _dotted(node.func) in HOST_FUNCTIONS
    return False


def _predicate_method(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in HOST_PREDICATE_METHODS:
        return func.attr
    return None


_DECIDING = (ast.Compare, ast.BoolOp, ast.IfExp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
             ast.GeneratorExp, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)


class _Lift(ast.NodeTransformer):
    """Replace each maximal sub-expression the host cannot evaluate by a Name `oN`, recording it."""

    def __init__(self, first: int):
        self.next = first
        self.observed: list[tuple[int, ast.expr]] = []

    def lift(self, node: ast.expr) -> ast.expr:
        if _host_evaluable(node) or not self._can_descend(node):
            if _host_evaluable(node):
                return node
            return self._observe(node)
        return self.generic_visit(node)

    def _can_descend(self, node: ast.AST) -> bool:
        """Host operators whose operands may be (partly) observed."""
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return not any(isinstance(e, ast.Starred) for e in node.elts)  # [*f(x)] is observed whole
        if isinstance(node, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
            return True
        if isinstance(node, ast.BinOp):
            return isinstance(node.op, _HOST_BINOPS)
        if isinstance(node, ast.Dict):
            return all(k is not None for k in node.keys)
        if isinstance(node, ast.Call) and all(k.arg is not None for k in node.keywords):
            return _dotted(node.func) in HOST_CHECKS or _predicate_method(node) is not None
        return False

    def generic_visit(self, node):
        if isinstance(node, ast.Call) and _predicate_method(node) is not None:
            node.func.value = self.lift(node.func.value)  # the receiver; the method runs on the host
        for field, value in ast.iter_fields(node):
            if field in ("ops", "op", "func", "ctx"):
                continue
            if isinstance(value, list):
                setattr(node, field, [self.lift(v) if isinstance(v, ast.expr) else self._kw(v) for v in value])
            elif isinstance(value, ast.expr):
                setattr(node, field, self.lift(value))
        return node

    def _kw(self, item):
        if isinstance(item, ast.keyword):
            item.value = self.lift(item.value)
        return item

    def _observe(self, node: ast.expr) -> ast.Name:
        for sub in ast.walk(node):
            if isinstance(sub, _DECIDING):
                raise UnjudgeableAssert(f"`{_src(node)}` decides inside the program's process "
                                        f"({type(sub).__name__.lower()})")
        k = self.next
        self.next += 1
        self.observed.append((k, node))
        return ast.copy_location(ast.Name(id=f"{OBS_PREFIX}{k}", ctx=ast.Load()), node)


def _observation_id(node: ast.AST) -> int | None:
    if isinstance(node, ast.Name) and node.id.startswith(OBS_PREFIX) and node.id[len(OBS_PREFIX):].isdigit():
        return int(node.id[len(OBS_PREFIX):])
    return None


def _src(node: ast.AST, n: int = 80) -> str:
    text = ast.unparse(node)
    return text if len(text) <= n else text[:n] + "…"


def _needs_program(node: ast.AST) -> bool:
    return any(_observation_id(n) is not None for n in ast.walk(node))


def _check_independent(test: ast.expr, source: str) -> None:
    """Two values from the program's process are never combined: every comparison has a side the program
    did not produce (the expected value), and no arithmetic or host function takes two observed operands.

    The program controls every value it reports, so `f(1) == g(1)`, `abs(f(3) - ref(3)) < 1e-6` or
    `f(1) - ref(1) == 0` (a reference computed in its process) would pass with any two equal values.
    Observations side by side in a tuple, list, set or dict are fine: each is still pinned by the
    expected value it is compared with; and/or join checks that are each judged this way."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            pairs = list(zip(sides, sides[1:]))
        elif isinstance(node, ast.BinOp):
            pairs = [(node.left, node.right)]
        elif isinstance(node, ast.Call):
            operands = [*node.args, *(k.value for k in node.keywords)]
            pairs = [(a, b) for i, a in enumerate(operands) for b in operands[i + 1:]]
        else:
            continue
        for a, b in pairs:
            if _needs_program(a) and _needs_program(b):
                raise UnjudgeableAssert(f"`{source}` combines two values that both come from the program's "
                                        "process (compare each with a literal)")


def _decision_observations(test: ast.expr) -> list[int]:
    """Observations whose truth value is the verdict: the test itself, under `not`, and/or, bool()/all()/
    any(), or compared with True/False. Their expected value is known to the program (truthy), so they
    must be the program's own answer (see _check_decisions)."""
    found: list[int] = []

    def visit(node: ast.AST) -> None:
        k = _observation_id(node)
        if k is not None:
            found.append(k)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            visit(node.operand)
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                visit(v)
        elif isinstance(node, ast.Call) and _dotted(node.func) in ("bool", "all", "any"):
            for a in node.args:
                for e in (a.elts if isinstance(a, (ast.List, ast.Tuple, ast.Set)) else [a]):
                    visit(e)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for op, (a, b) in zip(node.ops, zip(sides, sides[1:])):
                if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
                    for mine, other in ((a, b), (b, a)):
                        if isinstance(other, ast.Constant) and type(other.value) is bool:
                            visit(mine)

    visit(test)
    return found


def _foreign_names(tree: ast.Module) -> set[str]:
    """Names the snippet binds to something that is not the program's: its imports (but `from solution
    import f`), defs, classes and lambdas anywhere in it, and names assigned from a foreign name, a call of
    one or a lambda (`eq = operator.eq`, `eq = getattr(operator, "eq")`, `close = lambda a, b: ...`).
    Python's builtins and standard modules are foreign too."""
    import builtins
    import sys

    foreign = set(dir(builtins)) | set(sys.stdlib_module_names)  # `cmath.isclose` even when the program
    #   did the import
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            foreign.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "solution":
            foreign.update(a.asname or a.name for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            foreign.add(node.name)
    changed = True
    while changed:  # assignments from foreign things, to a fixed point (`a = operator; eq = a.eq`)
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                if not _from_foreign(node.value, foreign):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                if not names <= foreign:
                    foreign |= names
                    changed = True
    return foreign


def _from_foreign(value: ast.expr, foreign: set[str]) -> bool:
    """A value that is (or is made by) something foreign: a lambda, a foreign name or attribute of one,
    or a call of a foreign callable (`partial(...)`, `getattr(operator, "eq")`)."""
    if isinstance(value, ast.Lambda):
        return True
    if isinstance(value, ast.Call):
        return _from_foreign(value.func, foreign) and not (
            isinstance(value.func, ast.Name) and value.func.id in CONVERSIONS)
    root = value
    while isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
    return isinstance(root, ast.Name) and root.id in foreign


def _builtin_method_names() -> set[str]:
    names = set()
    for t in (str, bytes, list, tuple, dict, set, frozenset, int, float, complex, bool, object):
        names.update(dir(t))
    return names


_BUILTIN_METHODS = _builtin_method_names()


def _program_answer(expr: ast.expr, foreign: set[str]) -> str | None:
    """None when `expr` is a call of the program's own code (its function, or a method of its object);
    else why not. A predicate from outside the program (a builtin, a method of str or dict, a dunder, a
    library or snippet function) would decide in the program's process, where a str subclass or a
    patched module answers True to anything."""
    if not isinstance(expr, ast.Call):
        return "is not a call of the program's code"
    func = expr.func
    if isinstance(func, ast.Name):
        return f"calls `{func.id}`, not the program's code" if func.id in foreign else None
    if isinstance(func, ast.Attribute):
        if func.attr.startswith("__") or func.attr in _BUILTIN_METHODS:
            return f"calls `.{func.attr}`, a method of a built-in type"
        root = func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in foreign and not isinstance(func.value, ast.Call):
            return f"calls `{_src(func)}`, not the program's code"
        return None
    return "is not a call of the program's code"


def _check_decisions(test: ast.expr, observed: dict[int, ast.expr], foreign: set[str], source: str,
                     setup: dict[str, ast.expr]) -> None:
    for k in _decision_observations(test):
        why = _program_answer(observed[k], foreign)
        if why is not None:
            raise UnjudgeableAssert(f"`{source}`: its truth is decided in the program's process "
                                    f"(`{_src(observed[k])}` {why})")
    pinned = _pinned_observations(test)
    for k, expr in observed.items():
        why = _foreign_call(expr, foreign)
        if why is None and k not in pinned and _method_of_a_result(expr, setup):
            why = (f"`.{expr.func.attr}` is a method of a value the program returned; its result must be "
                   "compared with a literal that is not True/False/None/0/1")
        if why is not None:
            raise UnjudgeableAssert(f"`{source}`: a test value would be judged in the program's process "
                                    f"(`{_src(expr)}`: {why})")


def _foreign_call(expr: ast.expr, foreign: set[str]) -> str | None:
    """Why an observed expression lets something foreign see a test value (None when it does not).

    Inside an observation, test values (literals) may go to the program's own functions and methods only:
    a foreign callable (builtin, library, snippet helper, a method of a built-in type, a dunder) handed a
    literal next to a program value decides in the program's process (`operator.eq(f(), 42) == 1`,
    `close(f(1), 0.5)`). Conversions (list, sorted, len, ...) may take the program's values and keywords,
    but no positional literal (`max(f(), 5) == 5` would hand them the answer)."""
    for node in ast.walk(expr):
        if not isinstance(node, ast.Call):
            continue
        kind = _call_kind(node, foreign)
        if kind == "program":
            continue
        literals = [a for a in node.args if _has_literal(a, foreign)]
        if kind == "conversion":
            if literals:
                return f"`{_src(node.func)}` is given a literal"
            continue
        if literals or any(_has_literal(k.value, foreign) for k in node.keywords) or kind == "dunder":
            return f"`{_src(node.func)}` is not the program's code"
    return None


def _call_kind(node: ast.Call, foreign: set[str]) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        if func.id in CONVERSIONS:
            return "conversion"
        return "foreign" if func.id in foreign else "program"
    if isinstance(func, ast.Attribute):
        if func.attr.startswith("__"):
            return "dunder"
        root = func.value
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, ast.Name) and root.id in foreign and not isinstance(func.value, ast.Call):
            return "foreign"
        return "program"
    return "foreign"


def _has_literal(node: ast.expr, foreign: set[str]) -> bool:
    """A literal (or foreign name) reachable without passing through a call of the program's code."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Call) and _call_kind(node, foreign) == "program":
        return False
    return any(_has_literal(c, foreign) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))


def _method_of_a_result(expr: ast.expr, setup: dict[str, ast.expr]) -> bool:
    """`f(x).method(...)` (or `r = f(x)` ... `r.method(...)`): a method called on a value a function
    returned, whose answer may be a str/list subclass's, not on an object of a class the program defines
    (`Solution().isValid(...)`, `s = Solution()`: capitalised, by Python's naming convention)."""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)):
        return False
    receiver = expr.func.value
    if isinstance(receiver, ast.Name) and receiver.id in setup:
        receiver = setup[receiver.id]
    if not isinstance(receiver, ast.Call):
        return False
    name = receiver.func.id if isinstance(receiver.func, ast.Name) else (
        receiver.func.attr if isinstance(receiver.func, ast.Attribute) else "")
    return not name[:1].isupper()


_BOOL_LIKE = (True, False, None, 0, 1)


def _pinned_observations(test: ast.expr) -> set[int]:
    """Observations compared with == or != directly against a literal that is not bool-like: the
    program cannot pass them without knowing that literal."""
    pinned: set[int] = set()
    for node in ast.walk(test):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, (a, b) in zip(node.ops, zip(sides, sides[1:])):
            if not isinstance(op, (ast.Eq, ast.NotEq)):
                continue
            for mine, other in ((a, b), (b, a)):
                k = _observation_id(mine)
                if k is None or _needs_program(other):
                    continue
                try:
                    value = _eval(other, {})
                except Exception:
                    continue
                if not _bool_like(value):
                    pinned.add(k)
    return pinned


def _bool_like(value: Any) -> bool:
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_bool_like(v) for v in value)
    if isinstance(value, dict):
        return all(_bool_like(k) and _bool_like(v) for k, v in value.items())
    return any(value is b or (type(value) in (int, float) and value == b) for b in _BOOL_LIKE)


# ------------------------------------------------------------------------------------------- rewrite
def _inline_check_functions(tree: ast.Module) -> ast.Module:
    """`def check(candidate): <asserts>` + a single top-level `check(NAME)` -> the body, inlined."""
    defs = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    calls: dict[str, list[ast.Expr]] = {}
    for s in tree.body:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name):
            calls.setdefault(s.value.func.id, []).append(s)
    body = []
    for s in tree.body:
        fn = defs.get(s.value.func.id) if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(
            s.value.func, ast.Name) else None
        if fn is not None and _inlinable(fn, s.value, calls):
            for param, arg in zip(fn.args.args, s.value.args):
                body.append(ast.Assign(targets=[ast.Name(id=param.arg, ctx=ast.Store())], value=arg, lineno=0))
                # (lineno 0: an inlined statement has no source of its own)
            body.extend(fn.body)
            continue
        if isinstance(s, ast.FunctionDef) and s.name in calls and _inlinable(s, calls[s.name][0].value, calls):
            continue  # the def itself goes; its body is inlined at the call
        body.append(s)
    tree.body = body
    return tree


def _inlinable(fn: ast.FunctionDef, call: ast.Call, calls: dict) -> bool:
    a = fn.args
    if (len(calls.get(fn.name, [])) != 1 or fn.decorator_list or a.vararg or a.kwarg or a.kwonlyargs
            or a.posonlyargs or a.defaults or call.keywords or len(call.args) != len(a.args)):
        return False
    if not any(isinstance(n, ast.Assert) for n in ast.walk(fn)):
        return False
    banned = (ast.Return, ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)
    return not any(isinstance(n, banned) for n in ast.walk(fn)) and all(
        isinstance(x, (ast.Name, ast.Constant, ast.Attribute)) for x in call.args)


def rewrite_snippet(code: str, snippet: int = 0) -> tuple[str, list[AssertCheck]]:
    """(program for the sandbox, host checks) for one assert snippet. Raises UnjudgeableAssert."""
    if len(code) > MAX_SNIPPET_CHARS:
        raise UnjudgeableAssert(f"snippet longer than {MAX_SNIPPET_CHARS} characters")
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise UnjudgeableAssert(f"does not compile: {exc}") from None
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        if name.startswith(OBS_PREFIX) or name == OBSERVE:
            raise UnjudgeableAssert(f"line {node.lineno}: the name {name} is reserved for the judge")
    tree = _inline_check_functions(tree)
    lines = code.splitlines()
    foreign = _foreign_names(tree)
    setup = {t.id: st.value for st in tree.body if isinstance(st, ast.Assign)
             for t in st.targets if isinstance(t, ast.Name)}
    body: list[ast.stmt] = []
    checks: list[AssertCheck] = []
    next_obs = 0
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assert):
            for node in ast.walk(stmt):
                if isinstance(node, ast.Assert):
                    raise UnjudgeableAssert(f"line {node.lineno}: an assert inside "
                                            f"`{type(stmt).__name__.lower()}` runs in the program's process "
                                            "(asserts must be top-level statements)")
            body.append(stmt)
            continue
        source = _statement_source(lines, stmt)  # before lifting rewrites stmt.test in place
        lift = _Lift(next_obs)
        test = lift.lift(stmt.test)
        if not lift.observed:
            try:
                holds = evaluate_check(ast.unparse(test), {})
            except CheckFailed as exc:
                raise UnjudgeableAssert(f"line {stmt.lineno}: `{source}` cannot be evaluated: {exc}") from None
            if not holds:
                raise UnjudgeableAssert(f"line {stmt.lineno}: `{source}` is false without the program")
            continue  # a constant assert tests nothing
        _check_independent(test, source)
        _check_decisions(test, dict(lift.observed), foreign, source, setup)
        next_obs = lift.next
        for k, expr in lift.observed:
            body.append(ast.Expr(ast.Call(ast.Name(OBSERVE, ast.Load()), [
                ast.Constant(k), ast.Lambda(_no_args(), expr)], [])))
        checks.append(AssertCheck(snippet, ast.unparse(test), tuple(k for k, _ in lift.observed),
                                  source))
    module = ast.Module(body=body, type_ignores=[])  # unparsed, never compiled here: no locations needed
    return ast.unparse(module), checks


def _statement_source(lines: list[str], stmt: ast.stmt, n: int = 200) -> str:
    """The statement's text for messages: its source lines when it has them (an inlined one does not)."""
    if stmt.lineno > 0 and stmt.end_lineno and stmt.end_lineno <= len(lines):
        text = " ".join(" ".join(lines[stmt.lineno - 1:stmt.end_lineno]).split())
    else:
        text = ast.unparse(stmt)
    return text if len(text) <= n else text[:n] + "…"


def _no_args() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                         defaults=[])


# ---------------------------------------------------------------------------------- host evaluation
def evaluate_check(expr: str, values: dict[int, Any]) -> bool:
    """Evaluate a check (from rewrite_snippet) over observed values {id: value}. Raises CheckFailed."""
    try:
        tree = ast.parse(expr, mode="eval").body
        return bool(_truth(_eval(tree, values)))
    except CheckFailed:
        raise
    except Exception as exc:  # TypeError, OverflowError, RecursionError...: the values do not fit the check
        raise CheckFailed(f"{type(exc).__name__}: {str(exc)[:200]}") from None


def _truth(value: Any) -> bool:
    _plain(value)
    return bool(value)


def _plain(value: Any) -> Any:
    """Host operations accept only values rebuilt from plain data (see compare.decode_value)."""
    from sandbox.compare import Opaque

    if isinstance(value, Opaque):
        raise CheckFailed(f"not plain data: {value!r:.100}")
    if isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            _plain(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            _plain(k)
            _plain(v)
    return value


def _sized(value: Any) -> Any:
    if isinstance(value, (str, bytes, list, tuple, set, frozenset, dict, range)) and len(value) > _SIZE_LIMIT:
        raise CheckFailed("value too large")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1 << 16:
        raise CheckFailed("number too large")
    return value


_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
            ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_ARITH = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
          ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
          ast.Pow: lambda a, b: _power(a, b)}


def _power(a: Any, b: Any) -> Any:
    """a ** b, refused when an int result would pass 65,536 bits (`10 ** 9 + 7` and `2 ** 100` are fine)."""
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and a.bit_length() * b > 1 << 16:
        raise CheckFailed("power too large")
    return a ** b


def _arith(op: ast.operator, a: Any, b: Any) -> Any:
    """+ - * / // % on numbers; + on two str/list/tuple values; * of a str/list/tuple by an int (sized)."""
    seq = (str, list, tuple)
    if isinstance(op, ast.Sub) and isinstance(a, (set, frozenset)) and isinstance(b, (set, frozenset)):
        return a - b
    if isinstance(op, ast.Add) and type(a) is type(b) and isinstance(a, seq):
        if len(a) + len(b) > _SIZE_LIMIT:
            raise CheckFailed("value too large")
        return a + b
    if isinstance(op, ast.Mult) and (isinstance(a, seq) or isinstance(b, seq)):
        s, n = (a, b) if isinstance(a, seq) else (b, a)
        if isinstance(n, bool) or not isinstance(n, int) or len(s) * max(n, 0) > _SIZE_LIMIT:
            raise CheckFailed("unsupported or too large repetition")
        return s * n
    return _sized(_ARITH[type(op)](_number(a), _number(b)))


def _number(value: Any) -> Any:
    """A number the host may compute with: int, float, complex, Fraction or Decimal of bounded size (a
    Decimal('1e999999') or a Fraction of million-digit parts would hold the judge for a minute)."""
    from decimal import Decimal
    from fractions import Fraction

    if isinstance(value, bool) or not isinstance(value, (int, float, complex, Fraction, Decimal)):
        raise CheckFailed(f"arithmetic on {type(value).__name__}")
    if isinstance(value, Decimal) and value.is_finite() and abs(value.adjusted()) > 4300:
        raise CheckFailed("decimal too large")
    if isinstance(value, Fraction) and max(value.numerator.bit_length(), value.denominator.bit_length()) > 1 << 16:
        raise CheckFailed("fraction too large")
    return value


_NUMERIC_CHECKS = {"abs", "round", "math.fabs", "math.floor", "math.ceil", "math.sqrt", "math.trunc"}


def _eval(node: ast.AST, values: dict[int, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    k = _observation_id(node)
    if k is not None:
        if k not in values:
            raise CheckFailed(f"observation {k} missing")
        return _plain(values[k])
    name = _dotted(node)
    if name is not None:
        if name in HOST_CONSTANTS:
            return HOST_CONSTANTS[name]
        if name in HOST_TYPES:
            return HOST_TYPES[name]
        raise CheckFailed(f"unknown name {name}")
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, values) for e in node.elts)
    if isinstance(node, ast.List):
        return [_eval(e, values) for e in node.elts]
    if isinstance(node, ast.Set):
        return {_eval(e, values) for e in node.elts}
    if isinstance(node, ast.Dict):
        return {_eval(k, values): _eval(v, values) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, values)
        if isinstance(node.op, ast.Not):
            return not _truth(v)
        if isinstance(node.op, ast.USub):
            return -_number(v)
        if isinstance(node.op, ast.UAdd):
            return +_number(v)
        raise CheckFailed("unsupported unary operator")
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _ARITH:
            raise CheckFailed("unsupported operator")
        return _arith(node.op, _eval(node.left, values), _eval(node.right, values))
    if isinstance(node, ast.BoolOp):
        result = None
        for v in node.values:
            result = _eval(v, values)
            if isinstance(node.op, ast.And) != _truth(result):
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, values)
            if not bool(_COMPARE[type(op)](left, right)):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        args = [_sized(_eval(a, values)) for a in node.args]
        kwargs = {k.arg: _eval(k.value, values) for k in node.keywords}
        method = _predicate_method(node)
        if method is not None:
            receiver = _eval(node.func.value, values)
            if type(receiver) not in HOST_PREDICATE_METHODS[method]:
                raise CheckFailed(f".{method}() on {type(receiver).__name__}")
            return getattr(type(receiver), method)(receiver, *args, **kwargs)
        name = _dotted(node.func) or ""
        fn = HOST_FUNCTIONS.get(name)
        if fn is None:
            raise CheckFailed(f"unknown function {_src(node.func)}")
        if name in _NUMERIC_CHECKS and args:
            _number(args[0])
        return _sized(fn(*args, **kwargs))
    raise CheckFailed(f"unsupported expression {type(node).__name__}")

"""The gate's functions take few parameters: what belongs together travels as one typed value
(:class:`~pytest_segrobust.gate.verdict.Observation`, :class:`~pytest_segrobust.gate.verdict.Criteria`...),
so a new rule of the gate is a field, not one more parameter on every function it passes through.

Read from the source, so that a nested function or a method counts as much as a module's function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_segrobust.gate

GATE = Path(pytest_segrobust.gate.__file__).parent
MOST_PARAMETERS = 6


def parameter_count(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Every parameter of ``function`` (positional, keyword-only, ``*args``, ``**kwargs``) but a
    method's ``self`` or ``cls``, which the caller does not pass."""
    arguments = function.args
    named = [*arguments.posonlyargs, *arguments.args]
    if named and named[0].arg in ("self", "cls"):
        named = named[1:]
    starred = [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return len(named) + len(arguments.kwonlyargs) + len(starred)


def crowded(source: str, module: str) -> list[str]:
    """The functions of ``source`` with more than :data:`MOST_PARAMETERS` parameters, as
    ``module:line name (count)``."""
    return [
        f"{module}:{node.lineno} {node.name} ({parameter_count(node)})"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and parameter_count(node) > MOST_PARAMETERS
    ]


def test_no_function_of_the_gate_takes_more_than_six_parameters() -> None:
    modules = sorted(GATE.glob("*.py"))
    assert modules, f"no modules found in {GATE}"
    offenders = [name for path in modules for name in crowded(path.read_text(encoding="utf-8"), path.name)]
    assert not offenders, f"more than {MOST_PARAMETERS} parameters: {', '.join(offenders)}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(a, b, c, d, e, f): ...", []),
        ("def f(a, b, c, d, e, f, g): ...", ["m.py:1 f (7)"]),
        ("def f(a, b, c, *, d, e, f, g): ...", ["m.py:1 f (7)"]),
        ("def f(a, b, c, d, e, *args, **kwargs): ...", ["m.py:1 f (7)"]),
        ("class C:\n    def m(self, a, b, c, d, e, f): ...", []),
        ("class C:\n    @classmethod\n    def m(cls, a, b, c, d, e, f, g): ...", ["m.py:3 m (7)"]),
        ("def outer():\n    def inner(a, b, c, d, e, f, g): ...", ["m.py:2 inner (7)"]),
    ],
)
def test_the_count_takes_every_parameter_but_self_and_cls(source: str, expected: list[str]) -> None:
    assert crowded(source, "m.py") == expected

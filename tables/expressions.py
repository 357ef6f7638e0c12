"""The small arithmetic language in which specs and claims say how a number is computed.

Examples: ``mean(train_ppl, wikitext_ppl)`` (names are cells of the same row or
column), ``baseline.avg_ppl - avg_ppl`` (the group's baseline row),
``cell('table02', 'gpt2_124m_pm', 'avg_acc')`` (any cell of the same paper),
``64 ** 12``.  Comparisons and ``and``/``or`` make boolean claims.  Only the
nodes below are accepted; nothing is passed to ``eval``.
"""
from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from statistics import fmean

from common.errors import ReproError

Ref = tuple[str, str, str]  # (table, row, column) within one paper
Resolver = Callable[[ast.AST], Ref]

FUNCTIONS: dict[str, Callable[..., float]] = {
    "mean": lambda *xs: fmean(xs),
    "sum": lambda *xs: math.fsum(xs),
    "min": min,
    "max": max,
    "abs": abs,
    "sqrt": math.sqrt,
}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
            ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}


class ExpressionError(ReproError, ValueError):
    """An expression uses syntax or names the language does not have."""


def is_reference(node: ast.AST) -> bool:
    """Names, ``baseline.x`` and ``cell(...)`` calls stand for table cells (no private names)."""
    if isinstance(node, ast.Name):
        return not node.id.startswith("_")
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and not node.value.id.startswith("_") and not node.attr.startswith("_")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cell"


class Expression:
    """A parsed expression whose cell references were resolved once, at construction."""

    def __init__(self, text: str, resolve: Resolver):
        self.text = text
        try:
            self._tree = ast.parse(text, mode="eval").body
        except SyntaxError as error:
            raise ExpressionError(f"cannot parse {text!r}: {error.msg}") from error
        self._refs: dict[int, Ref] = {}
        self._resolve_all(self._tree, resolve)

    @property
    def refs(self) -> list[Ref]:
        """The cells this expression reads, in order of appearance, without repeats."""
        return list(dict.fromkeys(self._refs.values()))

    def _resolve_all(self, node: ast.AST, resolve: Resolver) -> None:
        if is_reference(node):
            self._refs[id(node)] = resolve(node)
            return
        if isinstance(node, ast.Call):
            if getattr(node.func, "id", None) not in FUNCTIONS or node.keywords:
                raise ExpressionError(f"unknown function in {self.text!r}; known: cell, {', '.join(FUNCTIONS)}")
            children = node.args
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            children = [node.left, node.right]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            children = [node.operand]
        elif isinstance(node, ast.Compare):
            children = [node.left, *node.comparators]
        elif isinstance(node, ast.BoolOp):
            children = node.values
        elif isinstance(node, ast.Constant):
            children = []
        else:
            raise ExpressionError(f"{type(node).__name__} is not allowed in {self.text!r}")
        for child in children:
            self._resolve_all(child, resolve)

    def evaluate(self, values: Mapping[Ref, float]) -> float | bool:
        """Value of the expression given a number for every referenced cell."""
        return self._eval(self._tree, values)

    def _eval(self, node: ast.AST, values: Mapping[Ref, float]):
        if id(node) in self._refs:
            return values[self._refs[id(node)]]
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)):
                raise ExpressionError(f"constant {node.value!r} is not a number in {self.text!r}")
            return node.value
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, values), self._eval(node.right, values)
            if isinstance(node.op, ast.Div) and right == 0:
                return math.nan  # undefined: the caller says so (a claim on our values, an audit check)
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp):
            operand = self._eval(node.operand, values)
            return (not operand if isinstance(node.op, ast.Not)
                    else (-operand if isinstance(node.op, ast.USub) else operand))
        if isinstance(node, ast.Compare):
            left, result = self._eval(node.left, values), True
            for op, right_node in zip(node.ops, node.comparators):
                right = self._eval(right_node, values)
                result, left = result and _COMPARE[type(op)](left, right), right
            return result
        if isinstance(node, ast.BoolOp):
            parts = [bool(self._eval(value, values)) for value in node.values]
            return all(parts) if isinstance(node.op, ast.And) else any(parts)
        return FUNCTIONS[node.func.id](*(self._eval(arg, values) for arg in node.args))

    def propagated_error(self, values: Mapping[Ref, float], half_units: Mapping[Ref, float]) -> float:
        """First-order bound on how much the inputs' printed rounding can move the result.

        Each input is moved by half a unit in its last printed place, up and down;
        the largest moves of the result are summed over inputs.
        """
        centre = float(self.evaluate(values))
        total = 0.0
        for ref in self.refs:
            moved = [abs(float(self.evaluate({**values, ref: values[ref] + sign * half_units[ref]})) - centre)
                     for sign in (-1.0, 1.0)]
            total += max(moved)
        return total

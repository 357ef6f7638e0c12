"""The formula language: evaluation, references, refusal of anything else, error propagation."""
import ast

import pytest

from tables.expressions import Expression, ExpressionError


def resolve(node):
    """Names are cells of table 't', row 'r'; cell('row', 'col') is explicit."""
    if isinstance(node, ast.Call):
        return ("t", node.args[0].value, node.args[1].value)
    return ("t", "r", ast.unparse(node))


def test_evaluates_arithmetic_over_cells():
    expression = Expression("mean(a, b) - cell('x', 'c') / 2 + 2 ** 3", resolve)
    assert expression.refs == [("t", "r", "a"), ("t", "r", "b"), ("t", "x", "c")]
    values = {("t", "r", "a"): 1.0, ("t", "r", "b"): 3.0, ("t", "x", "c"): 4.0}
    assert expression.evaluate(values) == pytest.approx(8.0)


def test_comparisons_and_counts():
    values = {("t", "r", "a"): 1.0, ("t", "r", "b"): 2.0}
    assert Expression("a < b and not b < a", resolve).evaluate(values) is True
    assert Expression("(a < b) + (b < a) + (a == a)", resolve).evaluate(values) == 2
    assert Expression("a < b < a", resolve).evaluate(values) is False


@pytest.mark.parametrize("text", ["__import__('os')", "a.__class__", "[a, b]", "open('x')", "lambda: 1",
                                  "a if b else c",
                                  "'text'", "mean(a, key=b)", "a @ b"])
def test_refuses_anything_else(text):
    with pytest.raises(ExpressionError):
        expression = Expression(text, lambda node: ("t", "r", "x") if isinstance(node, ast.Name) else resolve(node))
        expression.evaluate({("t", "r", "x"): 1.0})


def test_propagated_error_of_mean_and_difference():
    values = {("t", "r", "a"): 10.0, ("t", "r", "b"): 20.0}
    halves = {("t", "r", "a"): 0.005, ("t", "r", "b"): 0.005}
    assert Expression("mean(a, b)", resolve).propagated_error(values, halves) == pytest.approx(0.005)
    assert Expression("a - b", resolve).propagated_error(values, halves) == pytest.approx(0.01)
    assert Expression("a / b", resolve).propagated_error(values, halves) == \
        pytest.approx(0.5 * (0.005 / 10 + 0.005 / 20), rel=1e-3)

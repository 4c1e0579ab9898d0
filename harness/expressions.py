"""The safe arithmetic evaluator for `expr` axes and roofline expressions (the official rules).

Allowed: int/float literals, names already resolved, binary + - * / // % **, unary + -, parentheses.
Anything else (calls, attributes, subscripts, comparisons) is a TypeError.
"""

from __future__ import annotations

import ast
import operator

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def safe_eval(expression: str, names: dict[str, int | float], *, integral: bool = False) -> int | float:
    """Evaluate `expression` over `names`.

    With `integral`, a float result with an integral value becomes an int and any other float is a TypeError
    (the official rule for expr axes).
    """
    tree = ast.parse(expression, mode="eval")
    value = _eval(tree.body, names, expression)
    if integral:
        if isinstance(value, float):
            if not value.is_integer():
                raise TypeError(f"expression {expression!r} gave the non-integral value {value}")
            value = int(value)
    return value


def _eval(node: ast.AST, names: dict[str, int | float], expression: str) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise TypeError(f"expression {expression!r}: unknown name {node.id!r}")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](
            _eval(node.left, names, expression), _eval(node.right, names, expression)
        )
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, names, expression))
    raise TypeError(f"expression {expression!r}: {type(node).__name__} is not allowed")

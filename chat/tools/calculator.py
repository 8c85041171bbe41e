"""`calculator`: arithmetic evaluated over Python's AST, never with eval().

Only numbers, + - * / // % **, unary signs, parentheses and a few math
functions and constants are accepted; anything else is a tool error. Powers and
factorials are bounded so that `9**9**9` cannot eat the server.
"""

from __future__ import annotations

import ast
import math
import operator

from chat.agent.tools import ToolError

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
_FUNCTIONS = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "floor": math.floor, "ceil": math.ceil,
    "log": math.log, "log10": math.log10, "log2": math.log2, "exp": math.exp,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos,
    "atan": math.atan, "factorial": math.factorial, "min": min, "max": max,
}  # fmt: skip
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 10_000
MAX_FACTORIAL = 1_000
MAX_RESULT_DIGITS = 4_300  # Python's own int->str limit
_RESULT_LIMIT = 10**MAX_RESULT_DIGITS


def _number(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolError(f"not a number: {value!r}")
    return value


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        return _number(node.value)
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise ToolError(f"unknown name {node.id!r}")
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise ToolError(f"exponent {right} is too large (limit {MAX_EXPONENT})")
            # A small exponent of a big base, (10**4000)**10000, would still compute for
            # seconds before the size check below: estimate the size first.
            if isinstance(left, int) and isinstance(right, int) and right > 1:
                if (abs(left).bit_length() - 1) * right > MAX_RESULT_DIGITS * 3.33:
                    raise ToolError("the result is too large")
        result = _BINARY[type(node.op)](left, right)
        if isinstance(result, int) and abs(result) >= _RESULT_LIMIT:
            raise ToolError("the result is too large")
        return result
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        if node.keywords:
            raise ToolError("keyword arguments are not supported")
        args = [_eval(arg) for arg in node.args]
        if node.func.id == "factorial" and args and args[0] > MAX_FACTORIAL:
            raise ToolError(f"factorial argument is too large (limit {MAX_FACTORIAL})")
        return _FUNCTIONS[node.func.id](*args)
    raise ToolError(f"unsupported syntax: {ast.dump(node)[:80]}")


def evaluate(expression: str) -> str:
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    if not text:
        raise ToolError("empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}") from None
    try:
        value = _eval(tree)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except (OverflowError, ValueError, TypeError) as exc:
        raise ToolError(f"cannot evaluate: {exc}") from None
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    return str(value)


async def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression (+ - * / // % **, parentheses, sqrt, log, sin, pi, e ...) and return the result."""
    return evaluate(expression)

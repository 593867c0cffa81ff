"""Tests for symbounds.expr: the safe target-function parser."""
import ast
import builtins
import importlib
import pathlib

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import symbounds.core.expr as expr_mod
from symbounds.core.expr import ExprError, parse_target, target_function, variables

X1, X2, X3 = variables(3)
R = sympy.Rational


# ---------------------------------------------------------------- variables

def test_variables_are_stable_real_symbols():
    xs = variables(3)
    assert [str(x) for x in xs] == ["x1", "x2", "x3"]
    assert all(x.is_real for x in xs)
    assert variables(3) == xs and variables(2) == xs[:2]
    assert xs[0] == sympy.Symbol("x1", real=True)
    assert xs[0] != sympy.Symbol("x1")  # assumptions are part of the identity
    assert variables(0) == ()


@pytest.mark.parametrize("d", [-1, 1.5, "2", True, None])
def test_variables_rejects_bad_dimension(d):
    with pytest.raises(ExprError):
        variables(d)


# ---------------------------------------------------------------- valid input

CASES = [
    ("sin(2*pi*x1) + 0.5*x2^2", sympy.sin(2 * sympy.pi * X1) + R(1, 2) * X2**2),
    ("0.1", R(1, 10)),
    ("1/3", R(1, 3)),
    ("-x1^2", -(X1**2)),
    ("(-x1)^2", X1**2),
    ("2^-1", R(1, 2)),
    ("2^-x1", 2 ** (-X1)),
    ("min(x1, 1/2)", sympy.Min(X1, R(1, 2))),
    ("max(x1, x2, 0)", sympy.Max(X1, X2, 0)),
    ("abs(x1-0.3)^0.5", sympy.sqrt(sympy.Abs(X1 - R(3, 10)))),
    ("1e-3", R(1, 1000)),
    ("2.5E+2", sympy.Integer(250)),
    (".5e1", sympy.Integer(5)),
    ("3.", sympy.Integer(3)),
    ("0.000", sympy.Integer(0)),
    ("2**3", sympy.Integer(8)),
    ("2^3^2", sympy.Integer(512)),
    ("2**3**2", sympy.Integer(512)),
    ("8/4/2", sympy.Integer(1)),
    ("1-2-3", sympy.Integer(-4)),
    ("2*3+4*5", sympy.Integer(26)),
    ("2*(3+4)*5", sympy.Integer(70)),
    ("--x1", X1),
    ("+x1", X1),
    ("-2^2", sympy.Integer(-4)),
    ("x1/x2/x3", X1 / (X2 * X3)),
    ("x1 - x2 + x3", X1 - X2 + X3),
    ("exp(x1) * log(x2)", sympy.exp(X1) * sympy.log(X2)),
    ("exp(1)", sympy.E),
    ("cos(pi)", sympy.Integer(-1)),
    ("sqrt(x1^2 + x2^2)", sympy.sqrt(X1**2 + X2**2)),
    ("\t x1 \n+\r 1 ", X1 + 1),
    ("x1^1000", X1**1000),
    ("(x1+1)^1000", (X1 + 1) ** 1000),
    ("(1+sqrt(2))^2", (1 + sympy.sqrt(2)) ** 2),
    ("(-2)^3", sympy.Integer(-8)),
    ("sin(2^64)", sympy.sin(sympy.Integer(2) ** 64)),
    ("2^1000", sympy.Integer(2) ** 1000),
    ("exp(10*log(2))", sympy.Integer(1024)),
    ("0.1 + 0.2", R(3, 10)),
    ("1/3 + 1/6", R(1, 2)),
    ("(" * 100 + "x1" + ")" * 100, X1),
]


@pytest.mark.parametrize("text, expected", CASES, ids=[c[0][:30] for c in CASES])
def test_parses(text, expected):
    got = parse_target(text, 3)
    assert got == expected
    assert got.free_symbols <= set(variables(3))
    assert not got.atoms(sympy.Float)


def test_decimal_is_exact_rational():
    v = parse_target("0.1", 1)
    assert isinstance(v, sympy.Rational) and (v.p, v.q) == (1, 10)


def test_result_symbols_are_the_variables():
    e = parse_target("x1 + x2", 2)
    assert e.free_symbols == set(variables(2))
    assert e.subs({X1: 1, X2: 2}) == 3


def test_target_function():
    e = parse_target("x1*x2", 2)
    assert target_function(e, 2) is e
    with pytest.raises(ExprError):
        target_function(sympy.Symbol("y") + X1, 2)
    with pytest.raises(ExprError):
        target_function(X1 * X2, 1)
    with pytest.raises(ExprError):
        target_function(sympy.Symbol("x1") + 1, 2)  # same name, missing real=True
    with pytest.raises(ExprError):
        target_function("x1", 2)


# ---------------------------------------------------------------- hostile input

HOSTILE = [
    "__import__('os').system('ls')", "x1.__class__", "().__class__.__bases__", "lambda: 1",
    "exec('1')", 'eval("1")', "open('/etc/passwd')", "import os", 'os.system("ls")',
    "x1;x2", "x1 = 1", "x1 == 1", "[x1]", "{}", "'a'", '"a"', "x1 @ x2", "x1 \\ 2", "a:b",
    "!x1", "x1 if x1 else 0", "x1 if 1 else 0",
    "9^9^9^9", "9**9**9**9", "2^(10^9)", "2^(1000+pi)", "(2^3999)^2", "(9^999)^9",
    "exp(10^9*log(2))", "exp(log(2)*(10^9+pi))", "exp(1)^(10^9*log(2))",
    "1e99999", "1e1001", "1e-99999", "1" * 2000, "(" * 200 + "x1" + ")" * 200,
    "(" * 101 + "x1" + ")" * 101, "-" * 200 + "x1", "log(1+" * 95 + "x1" + ")" * 95,
    "max(" + ",".join(["x1"] * 40) + ")",
    "x0", "x3", "x01", "x", "y", "e", "E", "I", "oo", "nan", "zoo", "inf",
    "foo(x1)", "pi(1)", "x1(2)", "sin()", "sin(x1, x2)", "max(x1)", "min()", "sin(x1,)",
    "min(,x1)", "sin", "sin x1", "abs",
    "sqrt(-1)", "log(-1)", "(-8)^(1/3)", "(-2)^pi", "x1 + sqrt(-2)", "max(x1, log(-log(2))^1000)",
    "exp(sin(exp(1000^16)))", "sin(2^65)", "cos(x1*10^30)", "exp(exp(exp(1000)))",
    "(1+sqrt(2))^1000", "max(0, ((2/(log(2)+pi))^999)^log(log(2)))",
    "1/0", "x1/(2-2)", "x1/sin(pi)", "0^-1", "1/(0^-1)", "log(0)", "0*log(0)",
    "x1 x2", "2 3", "2x1", "x1 +", "x1 *", "x1^", "x1**", "*x1", "/x1", "^2", ")", "(", "(x1",
    "x1)", "((x1)", "()", ",", "1.2.3", "x1.5", ".", "1e", "1e+", "..5",
    "x\u2081", "x1\u00a0", "\u00e9", "x1\u2028", "x1\x00", "\uff581",
    "", "   ", "\n\t",
]


@pytest.mark.parametrize("text", HOSTILE, ids=[repr(h)[:40] for h in HOSTILE])
def test_hostile_rejected(text):
    with pytest.raises(ExprError) as info:
        parse_target(text, 2)
    msg = str(info.value)
    assert msg and "\n" not in msg and "\r" not in msg


@pytest.mark.parametrize("bad", [None, 3, b"x1", ["x1"]])
def test_non_string_rejected(bad):
    with pytest.raises(ExprError):
        parse_target(bad, 2)


def test_messages_name_the_problem():
    def msg(text, d=2):
        with pytest.raises(ExprError) as info:
            parse_target(text, d)
        return str(info.value)
    assert "unknown variable 'y'" in msg("x1 + y")
    assert "unknown variable 'x3'" in msg("x3")
    assert "unknown function 'foo'" in msg("foo(x1)")
    assert "division by zero" in msg("1/0")
    assert "division by zero" in msg("x1/(2-2)")
    assert "'_'" in msg("x1.__class__")
    assert "position 2" in msg("x1;x2")
    assert "empty" in msg("  ")
    assert "too long" in msg("1" * 2000)
    assert "too deep" in msg("(" * 200 + "x1" + ")" * 200)


def test_error_is_value_error():
    assert issubclass(ExprError, ValueError)


# ---------------------------------------------------------------- no evaluator

def test_never_uses_eval_or_sympify(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("forbidden call")

    def no_strings(original):
        def wrapper(a, *args, **kwargs):
            if isinstance(a, str):
                raise AssertionError("string handed to SymPy")
            return original(a, *args, **kwargs)
        return wrapper

    core_sympify = importlib.import_module("sympy.core.sympify")  # the module, not the function
    sympy_parser = importlib.import_module("sympy.parsing.sympy_parser")
    monkeypatch.setattr(builtins, "eval", boom)
    monkeypatch.setattr(builtins, "exec", boom)
    monkeypatch.setattr(ast, "literal_eval", boom)
    monkeypatch.setattr(sympy, "sympify", no_strings(sympy.sympify))
    monkeypatch.setattr(core_sympify, "sympify", no_strings(core_sympify.sympify))
    monkeypatch.setattr(sympy_parser, "parse_expr", boom)
    monkeypatch.setattr(sympy, "parse_expr", boom, raising=False)
    monkeypatch.setattr(sympy, "Rational", no_strings(sympy.Rational))
    monkeypatch.setattr(sympy, "Float", boom)
    for text, expected in CASES:
        assert parse_target(text, 3) == expected
    with pytest.raises(ExprError):
        parse_target("__import__('os')", 3)


def test_source_has_no_evaluator_calls():
    tree = ast.parse(pathlib.Path(expr_mod.__file__).read_text())
    forbidden = {"eval", "exec", "compile", "sympify", "parse_expr", "literal_eval",
                 "__import__", "Float", "S", "getattr", "globals", "locals"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and getattr(f.value, "id", None) == "re":
                continue  # re.compile of the module's own constant patterns
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
            assert name not in forbidden, f"call to {name} at line {node.lineno}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            assert not {a.name for a in node.names} & forbidden


# ---------------------------------------------------------------- property test

def _leaf():
    ints = st.integers(0, 20).map(lambda n: (str(n), sympy.Integer(n)))
    decs = st.tuples(st.integers(0, 9), st.integers(0, 99)).map(
        lambda t: (f"{t[0]}.{t[1]:02d}", R(100 * t[0] + t[1], 100)))
    var = st.sampled_from([("x1", X1), ("x2", X2), ("x3", X3), ("pi", sympy.pi)])
    return st.one_of(ints, decs, var)


_NONZERO = st.one_of(
    st.integers(1, 20).map(lambda n: (str(n), sympy.Integer(n))),
    st.integers(1, 999).map(lambda n: (f"0.{n:03d}", R(n, 1000))))
_FUNCS = {"sin": sympy.sin, "cos": sympy.cos, "abs": sympy.Abs}
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _extend(children):
    binop = st.tuples(children, st.sampled_from(sorted(_OPS)), children).map(
        lambda t: (f"({t[0][0]}{t[1]}{t[2][0]})", _OPS[t[1]](t[0][1], t[2][1])))
    div = st.tuples(children, _NONZERO).map(
        lambda t: (f"({t[0][0]}/{t[1][0]})", t[0][1] / t[1][1]))
    func = st.tuples(st.sampled_from(sorted(_FUNCS)), children).map(
        lambda t: (f"{t[0]}({t[1][0]})", _FUNCS[t[0]](t[1][1])))
    # sqrt only of abs(...): non-real constants such as sqrt(-2) are rejected by design
    root = children.map(lambda c: (f"sqrt(abs({c[0]}))", sympy.sqrt(sympy.Abs(c[1]))))
    neg = children.map(lambda c: (f"(-{c[0]})", -c[1]))
    power = st.tuples(children, st.integers(0, 3)).map(
        lambda t: (f"({t[0][0]})^{t[1]}", t[0][1] ** t[1]))
    return st.one_of(binop, div, func, root, neg, power)


TREES = st.recursive(_leaf(), _extend, max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(TREES)
def test_parse_matches_directly_built_tree(tree):
    text, expected = tree
    got = parse_target(text, 3)
    # Both sides are built by the same SymPy operations, so they must be structurally
    # identical; structural equality cannot hold for mathematically different trees.
    assert got == expected, (text, got, expected)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="x123pi+-*/^(),. e0sinlogmaxb", max_size=40))
def test_random_text_never_crashes(text):
    try:
        got = parse_target(text, 3)
    except ExprError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(got, sympy.Expr)
        assert got.free_symbols <= set(variables(3))

"""A deliberately tiny construction, registered by the catalogue test (docs/adding-a-construction.md).

One hardmax attention layer over tokens ``z_k = (x_k, 1)`` (a ``2 x n`` matrix, tokens are
columns) with ``W_Q = (0 1)``, ``W_K = (1 0)``: the score ``<W_Q z_j, W_K z_k> = x_k`` does not
depend on ``j``, so every token attends to the largest ``x_k`` (ties: equal tokens, averaged).
With ``W_V = W_O = I`` and skip ``rho = 0`` every output token is ``(max_k x_k, 1)``.

Claims: T1 every output token equals the maximum (exact rationals); T2 one block.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping

from symbounds.core.claims import Claim, Relation, conclude, decide
from symbounds.core.contexts import ExactContext
from symbounds.core.exact import parse_number
from symbounds.core.paper import Figure, Paper, Parameter, Proof
from symbounds.core.transformer import Attention, Head, Transformer, forward

PARAMETERS = (Parameter("tokens", "1/3,-2,5/7,0", "the token values x_1..x_n, comma-separated"),)

MAXIMUM = Claim("T1", "every output token equals the largest input token",
                r"\max_j \bigl|T(X)_j - \max_k x_k\bigr| = 0", Relation.ZERO)
BLOCKS = Claim("T2", "blocks L <= 1", r"L \le 1", Relation.LE)
CLAIMS = (MAXIMUM, BLOCKS)


@dataclass(frozen=True)
class TinyInstance:
    tokens: tuple[Fraction, ...]


def instance(values: Mapping[str, str]) -> TinyInstance:
    unknown = set(values) - {p.name for p in PARAMETERS}
    if unknown:
        raise ValueError(f"unknown parameter {sorted(unknown)[0]!r}")
    text = values.get("tokens", PARAMETERS[0].default)
    tokens = tuple(parse_number(t.strip(), "tokens") for t in text.split(","))
    return TinyInstance(tokens)


def build(inst: TinyInstance) -> Transformer:
    head = Head(W_Q=((0, 1),), W_K=((1, 0),), W_V=((1, 0), (0, 1)), W_O=((1, 0), (0, 1)))
    return Transformer(layers=(Attention(kind="hardmax", heads=(head,), skip=0),), input="tokens")


def sample_input(inst: TinyInstance) -> list[list[Fraction]]:
    return [list(inst.tokens), [Fraction(1)] * len(inst.tokens)]


def prove(inst: TinyInstance) -> Proof:
    model = build(inst)
    return Proof(verdicts(model, inst), model)


def verdicts(model: Transformer, inst: TinyInstance) -> list:
    """The verdicts on T1, T2 for ``model`` (the built network, or any other of the same shape)."""
    ctx = ExactContext()
    Z = forward(ctx, model, sample_input(inst))
    top = ctx.convert(max(inst.tokens))
    worst = ctx.zero
    for z in Z[0]:
        worst = ctx.max(worst, ctx.abs(z - top))
    return [decide(ctx, MAXIMUM.measured(worst)),  # a measurement, decided in the context
            conclude(BLOCKS, len(model.layers) <= 1, "exact",  # a fact decided by the construction
                     lhs=str(len(model.layers)), rhs="1")]


def report(inst: TinyInstance, proof: Proof) -> str:
    """The construction's own line after the claims: the maximum every token now holds."""
    return f"maximum  {max(inst.tokens)} (of {len(inst.tokens)} tokens)"


def latex(inst: TinyInstance, proof: Proof) -> list:
    """One section in the construction's notation: the attention that picks the maximum."""
    return [("The network", r"With $W_Q = (0\;1)$, $W_K = (1\;0)$ the score $\langle W_Q z_j, W_K z_k\rangle = x_k$ "
             rf"does not depend on $j$: every output token is $(\max_k x_k, 1) = ({max(inst.tokens)}, 1)$.")]


def figures(inst: TinyInstance, proof: Proof) -> list:
    """The tokens before and after the layer (exact values, from the network itself)."""
    ctx = ExactContext()
    out = forward(ctx, proof.model, sample_input(inst))[0]
    ks = list(range(1, len(inst.tokens) + 1))
    return [Figure("tokens", "tokens before and after the layer", "k", "x_k",
                   (("input", ks, list(inst.tokens)), ("output", ks, [Fraction(int(v.p), int(v.q)) for v in out])))]


PAPER = Paper(
    key="tiny",
    title="The maximum of a token set in one hardmax layer",
    citation="(a test construction)",
    docs="docs/adding-a-construction.md",
    parameters=PARAMETERS,
    instance=instance,
    build=build,
    claims=CLAIMS,
    prove=prove,
    sample_input=sample_input,
    examples=({"tokens": "1/3,-2,5/7,0"}, {"tokens": "1,-1,1"}),
    report=report,
    latex=latex,
    figures=figures,
)

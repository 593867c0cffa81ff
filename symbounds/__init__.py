"""symbounds: constructive proofs about Transformers, checked by a computer.

The public API, written out by hand.
"""

from .core.bound import BoundResult, bound, certify
from .core.claims import ClaimResult, Measured
from .core.contexts import BallContext, ExactContext, FPContext, MPContext, Undecided, make_context
from .core.expr import ExprError, parse_target
from .core.modelfile import load_model
from .core.transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer, forward
from .core.version import __version__

__all__ = [
    "__version__",
    "BallContext",
    "ExactContext",
    "FPContext",
    "MPContext",
    "Undecided",
    "make_context",
    "ExprError",
    "parse_target",
    "Attention",
    "Embedding",
    "FeedForward",
    "Head",
    "Readout",
    "Transformer",
    "forward",
    "ClaimResult",
    "Measured",
    "bound",
    "BoundResult",
    "certify",
    "load_model",
]

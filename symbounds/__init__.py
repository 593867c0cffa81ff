"""symbounds: constructive proofs about Transformers, checked by a computer.

The public API, written out by hand.
"""

__version__ = "0.1.0"

from .contexts import BallContext, ExactContext, FPContext, MPContext, Undecided, make_context
from .expr import ExprError, parse_target
from .transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer, forward
from .verify import ClaimResult, Measured

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
]

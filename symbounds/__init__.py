"""symbounds: constructive proofs about Transformers, checked by a computer.

The public API, written out by hand.
"""

from .core.bound import BoundResult, bound, certify
from .core.boxes import Box, CertifyOptions, certify_model
from .core.claims import Claim, ClaimResult, Measured, Verdict
from .core.contexts import BallContext, ExactContext, FPContext, MPContext, Undecided, make_context
from .core.expr import ExprError, parse_target
from .core.modelfile import export_model, load_model, model_from_json, model_to_json
from .core.transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer, forward
from .core.version import __version__
from .papers import CATALOGUE

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
    "Claim",
    "Verdict",
    "load_model",
    "export_model",
    "model_to_json",
    "model_from_json",
    "certify_model",
    "CertifyOptions",
    "Box",
    "CATALOGUE",
]

"""symbounds: constructive proofs about Transformers, checked by a computer.

The public API, written out by hand.  Each name is imported from its module on first use (PEP 562),
so that ``import symbounds.app.cli`` (the command line, ``symbounds --version``) does not load SymPy,
python-flint or NumPy before a command needs them.
"""

import importlib

from .core.version import __version__

#: public name -> the module that defines it
_WHERE = {
    "BoundResult": "core.bound", "bound": "core.bound", "certify": "core.bound",
    "Box": "core.boxes", "CertifyOptions": "core.boxes", "certify_model": "core.boxes",
    "Claim": "core.claims", "ClaimResult": "core.claims", "Measured": "core.claims", "Verdict": "core.claims",
    "BallContext": "core.contexts", "ExactContext": "core.contexts", "FPContext": "core.contexts",
    "MPContext": "core.contexts", "Undecided": "core.contexts", "make_context": "core.contexts",
    "ExprError": "core.expr", "parse_target": "core.expr",
    "export_model": "core.modelfile", "load_model": "core.modelfile", "model_from_json": "core.modelfile",
    "model_to_json": "core.modelfile",
    "Attention": "core.transformer", "Embedding": "core.transformer", "FeedForward": "core.transformer",
    "Head": "core.transformer", "Readout": "core.transformer", "Transformer": "core.transformer",
    "forward": "core.transformer",
    "CATALOGUE": "papers",
}

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


def __getattr__(name):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'symbounds' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))

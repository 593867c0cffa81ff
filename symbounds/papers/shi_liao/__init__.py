"""Shi & Liao's softmax partition of unity [SL26]: the two-block Transformer that approximates any
Hölder function (docs/shi_liao.md).

Z. Shi, W. Liao, *Learning Theory of Transformers: Local-to-Global Approximation via Softmax
Partition of Unity*, NeurIPS 2026, arXiv:2605.08811.

``constants`` (SymPy, each formula once), ``construction`` (the weights), ``claims`` (L1-L8, the
epsilon budget E0-E3, the assumptions A1/A2), ``run`` (one ``symbounds pou``), ``certificate``
(whole-cube certificates), ``manifolds/``, ``rate``, ``ablation``, ``tables``, ``sweep``.
The names most used are re-exported here: ``sl.Instance``, ``sl.constants``, ``sl.build``,
``sl.measure``.
"""

from .claims import *  # noqa: F401,F403
from .claims import EXACT_RETRY, constant_claims, decide_exactly, measure_point, tolerance  # noqa: F401
from .constants import *  # noqa: F401,F403
from .constants import ATT1, ATT2, FFN1, FFN2  # noqa: F401
from .construction import build  # noqa: F401

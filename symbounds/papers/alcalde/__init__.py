"""Alcalde, Fantuzzi & Zuazua's exact sequence interpolation [AFZ25] (docs/alcalde.md).

A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact Sequence Interpolation with Transformers*,
arXiv:2502.02270.

``dataset`` (exact datasets), ``construction`` (separation, leader selection, collapse,
interpolation; the hardmax network), ``softmax`` (the softmax variant and its certificate),
``evaluate`` (the exact evaluator of token sets), ``run`` (one ``symbounds interp``), ``stages``.
The construction's names are re-exported here: ``al.build``, ``al.verify``, ``al.sizes``.
"""

from .construction import *  # noqa: F401,F403

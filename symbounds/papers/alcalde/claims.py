"""The claims of exact sequence interpolation [AFZ25], declared once (docs/alcalde.md, "Claims").

The hardmax network is checked in exact rationals stage by stage (S1-S3), end to end (I1), and
against the paper's sizes (B1-B3).  The softmax network adds X1 (Arb balls: every token lands on
its own cluster's segment of the line) and X2 (exact: on each segment the remaining layers are the
constant map onto the target), whose conjunction is I1.
"""

from __future__ import annotations

from pathlib import Path

from ...core.claims import load_claims

__all__ = ["CLAIMS"]

#: Every claim of the interpolation proof, by id (declared in claims.toml beside this file).
CLAIMS = load_claims(Path(__file__).with_name("claims.toml"))

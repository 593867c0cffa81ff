"""A float64 NumPy implementation of a `symbounds-transformer/1` model (the baseline of the
benchmarks; it proves nothing).  Same conventions as symbounds.transformer: columns are tokens,
score = <W_Q z_j, W_K z_k> / tau, max-shifted softmax, ReLU feed-forward, skips, readout."""

import json

import numpy as np


def _arr(rows):
    return np.array([[float(_num(v)) for v in r] for r in rows], dtype=np.float64)


def _num(s):
    if "/" in s:
        p, q = s.split("/")
        return int(p) / int(q)
    return float(s)


class NumpyModel:
    def __init__(self, model_json: dict):
        m = model_json
        e = m["embedding"]
        self.base, self.E, self.col = _arr(e["base"]), _arr(e["E"]), e["column"]
        self.layers = []
        for L in m["layers"]:
            if L["type"] == "ffn":
                self.layers.append(("ffn", _arr(L["W1"]), np.array([_num(b) for b in L["b1"]]), _arr(L["W2"]),
                                    np.array([_num(b) for b in L["b2"]]), _num(L["skip"])))
            else:
                heads = [tuple(_arr(h[k]) for k in ("W_Q", "W_K", "W_V", "W_O")) for h in L["heads"]]
                self.layers.append(("attention", heads, _num(L["skip"]), _num(L.get("tau", "1"))))
        self.readout = (m["readout"]["row"], m["readout"]["column"])

    @classmethod
    def from_file(cls, path):
        with open(path) as f:
            return cls(json.load(f))

    def __call__(self, x):
        Z = self.base.copy()
        Z[:, self.col] += self.E @ np.asarray(x, dtype=np.float64)
        for L in self.layers:
            if L[0] == "ffn":
                _, W1, b1, W2, b2, eta = L
                Z = eta * Z + W2 @ np.maximum(W1 @ Z + b1[:, None], 0.0) + b2[:, None]
            else:
                _, heads, rho, tau = L
                out = rho * Z
                for WQ, WK, WV, WO in heads:
                    S = (WQ @ Z).T @ (WK @ Z) / tau
                    S -= S.max(axis=1, keepdims=True)
                    Pi = np.exp(S)
                    Pi /= Pi.sum(axis=1, keepdims=True)
                    out = out + WO @ ((WV @ Z) @ Pi.T)
                Z = out
        return Z[self.readout]

"""Regularised training of [AFZ25] in PyTorch (the optional extra ``symbounds[train]``).

PyTorch because the authors' experiment is a PyTorch script (Adam, cosine annealing, autograd)
and a CPU wheel installs without a GPU; everything runs in float64 on the CPU, seeded.  The
certified side (teacher, threshold, enclosures of what training reached) is
:mod:`symbounds.papers.alcalde.tikhonov` and needs no PyTorch.

One block of the trained class (:data:`~symbounds.papers.alcalde.tikhonov.PARAMETERS`), on a batch
``X`` of shape ``(N, n, d)`` (tokens as rows)::

    s_il = (q . x_i)(k . x_l),   pi = softmax_l(s),   z_i = rho x_i + sum_l pi_il V x_l
    out_i = eta z_i + W2 relu(W1 z_i + b1)

Loss: ``(1/N) sum_j max_i ||out_i(X^j) - y^j||^2`` (the squared Hausdorff distance to the one
target), full batch, Adam at ``lr = 1e-3`` with a cosine-annealed rate over the epochs of one
``eps``.  Initialisation as PyTorch's ``nn.Linear`` (uniform on ``+-1/sqrt(fan_in)``), ``rho = eta = 0``.

Two penalty conventions (``decay``):

* ``"coupled"`` -- Adam's own ``weight_decay = eps`` (the authors' script): it adds ``eps theta`` to
  the gradient, the gradient of ``(eps/2) ||theta||^2``, so the objective actually minimised is
  ``loss + (eps/2) ||theta||^2`` (penalty weight ``c = eps/2``);
* ``"decoupled"`` -- the penalty as its own term of the objective: ``loss + eps ||theta||^2`` is
  differentiated and plain Adam (no weight decay) steps on it (``c = eps``), the ``J_eps`` of the
  theorem exactly.

Warm start (the authors' script): the next ``eps`` starts from the weights the previous one
reached, with a fresh optimiser and schedule; otherwise every ``eps`` starts from the same seeded
initialisation.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import torch

from .tikhonov import PARAMETERS, WIDTH, TikhonovData

__all__ = ["Run", "train", "experiment", "init_params", "tensors", "loss_of", "DECAYS", "LR"]

DECAYS = ("coupled", "decoupled")
LR = 1e-3
DTYPE = torch.float64


def tensors(data: TikhonovData) -> tuple:
    """``(X, Y)``: inputs ``(N, n, d)`` (exact: binary rationals) and targets ``(N, d)`` (the exact
    rational targets rounded to float64)."""
    ds = data.dataset
    X = torch.tensor([[[float(v) for v in x] for x in seq] for seq in ds.inputs], dtype=DTYPE)
    Y = torch.tensor([[float(v) for v in Yj[0]] for Yj in ds.targets], dtype=DTYPE)
    return X, Y


def init_params(d: int, seed: int, width: int = WIDTH) -> dict:
    """Seeded initial weights, as ``nn.Linear`` would draw them (``rho = eta = 0``)."""
    g = torch.Generator().manual_seed(seed)
    uni = lambda shape, fan_in: (torch.rand(shape, generator=g, dtype=DTYPE) * 2 - 1) / math.sqrt(fan_in)
    return {
        "q": uni((d,), d), "k": uni((d,), d), "V": uni((d, d), d),
        "rho": torch.zeros((), dtype=DTYPE), "eta": torch.zeros((), dtype=DTYPE),
        "W1": uni((width, d), d), "b1": uni((width,), d), "W2": uni((d, width), width),
    }


def block(p: dict, X: torch.Tensor) -> torch.Tensor:
    """The block on a batch ``(N, n, d)``."""
    s = (X @ p["q"]).unsqueeze(-1) * (X @ p["k"]).unsqueeze(-2)  # (N, n, n)
    z = p["rho"] * X + torch.softmax(s, dim=-1) @ (X @ p["V"].T)
    return p["eta"] * z + torch.relu(z @ p["W1"].T + p["b1"]) @ p["W2"].T


def loss_of(p: dict, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """``(1/N) sum_j max_i ||T_i(X^j) - y^j||^2``."""
    return ((block(p, X) - Y.unsqueeze(1)) ** 2).sum(-1).amax(-1).mean()


def _norm_sq(p: dict) -> torch.Tensor:
    return sum((p[nm] ** 2).sum() for nm in PARAMETERS)


@dataclass
class Run:
    """One ``eps``: the training trace and what it reached (floats; certify with
    :func:`symbounds.papers.alcalde.tikhonov.certify_trained`)."""

    eps: Fraction
    decay: str
    epochs: int
    warm: bool
    losses: list  # data loss before each epoch's step
    final_loss: float  # data loss of the final weights
    norm_sq: float
    params: dict  # final weights as nested lists of floats
    seconds: float
    extra: dict = field(default_factory=dict)

    @property
    def penalty(self) -> Fraction:
        """The weight ``c`` of ``c ||theta||^2`` actually minimised (``eps/2`` coupled, ``eps`` decoupled)."""
        return self.eps / 2 if self.decay == "coupled" else self.eps

    @property
    def min_loss(self) -> float:
        return min(self.losses + [self.final_loss])

    def crossing(self, threshold: float) -> int | None:
        """The first epoch (1-based) whose recorded loss is below ``threshold`` (a statistic of the
        float trace), ``None`` if none is."""
        for t, v in enumerate(self.losses, 1):
            if v < threshold:
                return t
        return None


def train(data: TikhonovData, eps: Fraction, epochs: int, decay: str = "coupled", seed: int = 0,
          start: dict | None = None, lr: float = LR, progress=None, tensors_xy=None) -> Run:
    """Train one ``eps`` for ``epochs`` full-batch epochs from ``start`` (or the seeded init)."""
    if decay not in DECAYS:
        raise ValueError(f"unknown decay {decay!r} (use coupled or decoupled)")
    X, Y = tensors_xy or tensors(data)
    torch.manual_seed(seed)
    init = start if start is not None else init_params(data.dataset.d, seed)
    p = {nm: init[nm].detach().clone().requires_grad_(True) for nm in PARAMETERS}
    e = float(eps)
    opt = torch.optim.Adam(list(p.values()), lr=lr, weight_decay=e if decay == "coupled" else 0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    trace = torch.empty(epochs, dtype=DTYPE)
    t0 = time.perf_counter()
    every = max(1, epochs // 200)
    for t in range(epochs):
        opt.zero_grad(set_to_none=True)
        loss = loss_of(p, X, Y)
        objective = loss + e * _norm_sq(p) if decay == "decoupled" else loss
        objective.backward()
        opt.step()
        sched.step()
        trace[t] = loss.detach()
        if progress is not None and (t + 1) % every == 0:
            progress(t + 1, epochs)
    with torch.no_grad():
        final = float(loss_of(p, X, Y))
        nsq = float(_norm_sq(p))
    seconds = time.perf_counter() - t0
    return Run(Fraction(eps), decay, epochs, start is not None, trace.tolist(), final, nsq,
               {nm: p[nm].detach().tolist() for nm in PARAMETERS}, seconds)


def experiment(data: TikhonovData, eps_list, epochs_list, decay: str = "coupled", warm: bool = False,
               seed: int = 0, progress=None) -> list[Run]:
    """One run per ``eps`` (in the given order): from the seeded init each time, or (``warm``)
    each from the weights the previous one reached, as the authors' script does."""
    xy = tensors(data)
    runs: list[Run] = []
    start = None
    for i, (eps, epochs) in enumerate(zip(eps_list, epochs_list)):
        cb = None if progress is None else (lambda done, total, i=i, eps=eps: progress(i, eps, done, total))
        run = train(data, eps, epochs, decay, seed, start if warm else None, progress=cb, tensors_xy=xy)
        runs.append(run)
        if warm:
            start = {nm: torch.tensor(run.params[nm], dtype=DTYPE) for nm in PARAMETERS}
    return runs


def _sample(losses: list, points: int = 600) -> list:
    """``[[epoch, loss], ...]``: a log- and linearly-spaced subsample of a trace (for plots)."""
    E = len(losses)
    if E <= points:
        return [[t + 1, v] for t, v in enumerate(losses)]
    idx = {round(10 ** (math.log10(E) * k / (points // 2))) for k in range(points // 2 + 1)}
    idx |= {1 + (E - 1) * k // (points // 2) for k in range(points // 2 + 1)}
    return [[t, losses[t - 1]] for t in sorted(i for i in idx if 1 <= i <= E)]


def summarise(data: TikhonovData, runs: list, certify: bool = True, prec: int = 128) -> list[dict]:
    """Per run: the float statistics of the trace beside the exact threshold, and (``certify``)
    the Arb enclosures of what the final weights reach (:func:`tikhonov.certify_trained`)."""
    from ...core.exact import decimal
    from .tikhonov import certify_trained, params_from_floats

    star = data.theta_star_sq
    out = []
    for r in runs:
        threshold = r.eps * star
        row = {
            "eps": str(r.eps), "eps_float": float(r.eps), "decay": r.decay, "warm": r.warm, "epochs": r.epochs,
            "seconds": round(r.seconds, 3),
            "penalty_weight": str(r.penalty),
            "threshold": decimal(threshold), "threshold_float": float(threshold),
            "penalty_threshold": decimal(r.penalty * star),
            "crossing_epoch": r.crossing(float(threshold)),
            "min_loss": r.min_loss, "final_loss": r.final_loss,
            "norm_sq": r.norm_sq, "theta_star_sq": float(star),
            "trace": _sample(r.losses),
        }
        if certify:
            t0 = time.perf_counter()
            cert = certify_trained(data, params_from_floats(r.params), r.eps, r.penalty, prec)
            row["certified"] = cert.as_dict()
            row["certified"]["seconds"] = round(time.perf_counter() - t0, 3)
        out.append(row)
    return out

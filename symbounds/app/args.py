"""Command-line pieces shared by every sub-command: one-line usage errors, exact numbers from
flags, the instance flags of the partition-of-unity construction, output folders, progress."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import time
from fractions import Fraction

# SymPy, python-flint and the constructions are imported inside the functions that use them, so that
# ``symbounds --version`` and ``--help`` start without them (benchmarks/bench_startup.py).

__all__ = ["UsageError", "Parser", "number", "point", "add_instance_args", "instance", "check_out_folders", "Bar",
           "kernel_verdict",
           "show_progress", "written", "FIGURE_FORMATS", "add_digits_argument", "digits", "DEFAULT_DIGITS",
           "int_list", "number_list", "precision", "MAX_PREC", "random_interp_dataset"]


class UsageError(Exception):
    """Bad input from the command line (exit 2)."""


def ascii_int(text: str) -> int:
    """An integer flag written in ASCII digits (Python's ``int`` also accepts other scripts' digits)."""
    t = text.strip()
    if not (t.lstrip("+-").isascii() and t.lstrip("+-").isdigit()) or len(t) > 30:
        raise ValueError(text)
    return int(t)


ascii_int.__name__ = "int"  # argparse's message: "invalid int value: '...'"


def int_list(text: str, flag: str, names: str | None = None, count: int | None = None,
             per: str = "", positive: bool = True) -> list[int]:
    """Comma-separated positive integers in ASCII digits, as ``--random N,n,d,m`` or ``--size 4,8``
    take them: exactly as many as the comma-separated ``names`` (e.g. ``"N,n,d,m"``) when given,
    else one or ``count`` of them (any number without a ``count``; ``per`` names what there is one
    of, as in "one per eps"; ``positive=False`` also takes 0, for a range the caller checks).
    UsageError names the flag."""
    parts = [p.strip() for p in str(text).split(",")]
    want = names.count(",") + 1 if names else None
    if not all(p.isascii() and p.isdigit() and (int(p) > 0 or not positive) for p in parts) or \
            (want and len(parts) != want):
        kind = "positive integers" if positive else "integers"
        what = f"{_COUNTS.get(want, want)} {kind} {names}" if names else kind
        raise UsageError(f"{flag} {str(text)[:40]!r}: expected {what}")
    vals = [int(p) for p in parts]
    if count is not None and len(vals) not in (1, count):
        each = f"one per {per} ({count})" if per else str(count)
        raise UsageError(f"{flag} {str(text)[:40]!r}: give one number or {each}")
    return vals


_COUNTS = {2: "two", 3: "three", 4: "four", 5: "five"}


def number_list(text: str, flag: str, most: int | None = None, positive: bool = False) -> list[Fraction]:
    """Comma-separated exact numbers (``--eps 1/2,0.25``): at least one, at most ``most``, each read
    by :func:`symbounds.core.exact.parse_number` (never evaluated); ``positive``: each above 0.
    UsageError names the flag."""
    parts = [p.strip() for p in str(text).split(",")]
    if any(not p for p in parts) or (most is not None and len(parts) > most):
        count = f"1 to {most}" if most is not None else "one or more"
        raise UsageError(f"{flag} {str(text)[:40]!r}: expected {count} comma-separated numbers")
    out = [number(p, flag) for p in parts]
    for p, q in zip(parts, out):
        if positive and q <= 0:
            raise UsageError(f"{flag} {p[:40]}: must be positive")
    return out

MAX_PREC = 1 << 16  # the largest working precision, in bits: symbounds.core.contexts.MAX_PREC (not imported
#                     here, so that the command line starts without flint; tests/app/test_args_lists.py)


def precision(bits: int, flag: str = "--prec", lo: int | None = None, why: str = "") -> int:
    """``bits`` when it lies in ``lo..MAX_PREC`` (``lo`` defaults to the smallest precision of the
    ball contexts, :data:`symbounds.core.contexts.MIN_PREC`), else a UsageError naming ``flag``
    (and ``why`` the lower end is where it is)."""
    if lo is None:
        from ..core.contexts import MIN_PREC as lo
    if not (lo <= bits <= MAX_PREC):
        raise UsageError(f"{flag} {bits}: use between {lo} and {MAX_PREC} bits" + (f" ({why})" if why else ""))
    return bits


#: ``--random`` limits of an interpolation dataset: N * n tokens in all, and the dimension.
INTERP_MAX_TOKENS = 2_000_000
INTERP_MAX_D = 256


def random_interp_dataset(text: str, seed: int):
    """The seeded random dataset of [AFZ25] given by ``--random N,n,d,m`` (UsageError on a bad one)."""
    N, n, d, m = int_list(text, "--random", "N,n,d,m")
    if not (2 <= d <= INTERP_MAX_D) or not (1 <= m <= n) or N * n > INTERP_MAX_TOKENS:
        raise UsageError(f"--random {text}: need N, n >= 1, 2 <= d <= {INTERP_MAX_D}, 1 <= m <= n "
                         f"and N*n <= {INTERP_MAX_TOKENS}")
    from ..papers.alcalde.dataset import random_dataset

    return random_dataset(N, n, d, m, seed=seed)


class Parser(argparse.ArgumentParser):
    """Every parser and sub-parser of the command line: no abbreviated flags (``--ep`` is not taken for
    ``--eps``), ASCII integers, one-line errors with a "did you mean" for a mistyped command or flag."""

    #: the parser that parsed last (a sub-command's parser): its flags are the candidates of a suggestion
    last_parsed = None

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
        self.register("type", int, ascii_int)  # every type=int flag reads ASCII digits only

    def parse_known_args(self, args=None, namespace=None):
        Parser.last_parsed = self
        return super().parse_known_args(args, namespace)

    def error(self, message):  # one line, exit 2 (argparse would print the usage block first)
        raise UsageError(message + _suggestion(message, self))


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, except that a description or epilog with line breaks (the examples) is
    kept as written."""

    def _fill_text(self, text, width, indent):
        if "\n" in text:
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


def _suggestion(message: str, parser: argparse.ArgumentParser) -> str:
    """``" (did you mean --eps?)"`` for an unknown flag or an invalid choice close to a known one."""
    m = re.match(r"invalid choice: '(.*?)' \(choose from (.*)\)", message.partition(": ")[2])
    if m:
        word, known = m.group(1), re.findall(r"'([^']*)'", m.group(2))
    elif message.startswith("unrecognized arguments: "):
        word = message.split()[2].partition("=")[0]
        flags = set(parser._option_string_actions)
        if Parser.last_parsed is not None:
            flags |= set(Parser.last_parsed._option_string_actions)
        known = sorted(flags - {"-h", "--help"}) if word.startswith("-") else []
    else:
        return ""
    strip = lambda w: w.lstrip("-")  # noqa: E731  (flags compared by name: "--ep" is close to "--eps")
    names = {strip(k): k for k in known}
    close = [names[c] for c in difflib.get_close_matches(strip(word), list(names), n=3, cutoff=0.6)]
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def number(text: str, what: str) -> Fraction:
    from ..core.exact import NumberError, parse_number

    try:
        return parse_number(text, what)
    except NumberError as e:
        raise UsageError(str(e)) from None


def point(text: str, d: int) -> tuple:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != d or any(not p for p in parts):
        raise UsageError(f"--at {text[:40]!r}: expected {d} comma-separated coordinate(s)")
    x = tuple(number(p, f"--at {text[:40]!r}") for p in parts)
    if any(not (0 <= v <= 1) for v in x):
        raise UsageError(f"--at {text[:40]!r}: the point must lie in the cube [0,1]^{d}")
    return x


def show_progress(args) -> bool:
    """Is the tqdm bar shown (a terminal, not CI, not --quiet)?  Off a terminal :class:`Bar` prints
    a short line every few seconds instead."""
    return not args.quiet and not os.environ.get("CI") and _is_terminal(sys.stderr)


def add_instance_args(q) -> None:
    """The flags that define a [SL26] instance (shared by pou, certify)."""
    q.add_argument("--d", type=int, default=None, help="input dimension (default 1)")
    q.add_argument("--alpha", default=None, help="Hoelder exponent in (0, 1] (default 1)")
    q.add_argument("--holder", default=None, help="Hoelder constant C_H > 0 (default 2; manifold: its target's)")
    q.add_argument("--bound", default=None, help="sup-norm bound B > 0 of the target (default 2; manifold: its target's)")
    q.add_argument("--eps", default=None, help="accuracy in (0, 1) (default 0.1; manifold: by manifold)")
    q.add_argument("--target", default=None, help="target g as an expression in x1..xd (default: a 2-Lipschitz sine)")
    q.add_argument("--M", dest="M", default=None, help="replace the derived attention scale M")
    q.add_argument("--Mg", dest="Mg", default=None, help="replace the derived partition scale M_g")


_CUBE_DEFAULTS = {"d": 1, "alpha": "1", "holder": "2", "bound": "2", "eps": "0.1"}


def _manifold_instance(args):
    """``pou --manifold``: flags left out take the manifold's defaults (docs/shi_liao.md, Manifolds)."""
    from ..core.expr import ExprError
    from ..papers.shi_liao.manifolds.manifold import instance_from_args

    try:
        return instance_from_args(args)
    except ExprError as e:
        raise UsageError(f"--target: {e}") from None
    except ValueError as e:
        raise UsageError(str(e)) from None


def instance(args):
    """The [SL26] instance of the shared flags, validated (UsageError on bad input)."""
    import sympy

    from ..core.expr import ExprError
    from ..papers import shi_liao as sl

    if getattr(args, "manifold", None) is not None:
        return _manifold_instance(args)
    for k, v in _CUBE_DEFAULTS.items():
        if getattr(args, k) is None:
            setattr(args, k, v)

    if args.d < 1:
        raise UsageError(f"--d must be at least 1, got {args.d}")
    if args.d > 8:
        raise UsageError(f"--d {args.d}: dimensions above 8 need more than {sl.MAX_TOKENS} tokens")
    num = lambda v, w: sympy.Rational(number(v, w).numerator, number(v, w).denominator)
    try:
        inst = sl.Instance(
            d=args.d, alpha=num(args.alpha, "--alpha"), C_H=num(args.holder, "--holder"), B=num(args.bound, "--bound"),
            eps=num(args.eps, "--eps"), target=args.target,
            M=None if args.M is None else num(args.M, "--M"), M_g=None if args.Mg is None else num(args.Mg, "--Mg"),
        )
        inst.target_expr()  # parse errors surface before any work
    except ExprError as e:
        raise UsageError(f"--target: {e}") from None
    except ValueError as e:
        raise UsageError(str(e)) from None
    return inst


def check_out_folders(*paths) -> None:
    """Before any work, every file a command will write: not a folder or a device, in a folder
    that exists and takes a new file (:func:`symbounds.core.files.check_writable`)."""
    from ..core.files import check_writable

    for path in paths:
        if path is not None:
            check_writable(path, UsageError)


class Bar:
    """Progress on stderr.

    On a terminal (and not under ``CI``): a tqdm bar.  Off a terminal (a pipe, a log file, CI): one
    short line at most every ``interval`` seconds (default 5), e.g.
    ``symbounds: certify: 37% of the cube's volume certified, 412 boxes, 12 s``.  Under ``--quiet``:
    nothing.  ``stream`` and ``clock`` are there for tests.
    """

    INTERVAL = 5.0

    def __init__(self, args, unit, command=None, *, stream=None, clock=time.monotonic, interval=None):
        self.bar = None
        self.unit = unit
        self.command = command or getattr(args, "command", None) or "run"
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.interval = self.INTERVAL if interval is None else interval
        self.t0 = self.last = clock()
        self.lines = not getattr(args, "quiet", False)
        if self.lines and _is_terminal(self.stream) and not os.environ.get("CI"):
            from tqdm import tqdm

            self.lines = False
            self.bar = tqdm(total=0, unit=unit, leave=False, file=self.stream)

    def __call__(self, done, total, label=None):
        """``done`` of ``total`` units (``label``: what is being done, e.g. the precision)."""
        if self.bar is not None:
            self.bar.total = total
            if label:
                self.bar.set_description(label)
            self.bar.n = done
            self.bar.refresh()
        elif self.lines:
            units = self.unit + ("es" if self.unit.endswith(("x", "s")) else "s")
            self._line(f"{done} of {total} {units}" + (f" ({label})" if label else ""))

    def volume(self, fraction, boxes, what="the cube's volume", estimate=False):
        """``fraction`` (exact, in [0, 1]) of ``what`` certified so far, after ``boxes`` box evaluations.
        The percentage shown is rounded down (never more than is certified).  With ``estimate``,
        also the volume left (rounded up) and the time it would take at the rate since the first
        call (volume per second; the boxes near the hardest regions come last, so it is a guess
        that tends low)."""
        pct = (Fraction(fraction) * 100).__floor__()
        now = self.clock()
        if getattr(self, "_first", None) is None:
            self._first = (now, Fraction(fraction))
        left = ""
        if estimate and fraction < 1:
            t1, f1 = self._first
            rest = ((1 - Fraction(fraction)) * 100).__ceil__()
            left = f"{rest}% left"
            if fraction > f1 and now > t1:
                more = float((1 - Fraction(fraction)) / (Fraction(fraction) - f1)) * (now - t1)
                left += f" (about {_duration(more)} more at this rate)"
        if self.bar is not None:
            self.bar.total = 100
            self.bar.unit = "%"  # the bar counts percent of the volume, so its rate is %/s (boxes: the label)
            self.bar.set_description(f"{boxes} boxes")
            if left:
                self.bar.set_postfix_str(left, refresh=False)
            self.bar.n = pct
            self.bar.refresh()
        elif self.lines:
            self._line(f"{pct}% of {what} certified, {boxes} boxes" + (f", {left}" if left else ""))

    def stage(self, label):
        """A step without a count (e.g. "placing tokens at 256 bits")."""
        if self.bar is not None:
            self.bar.set_description(label)
            self.bar.refresh()
        elif self.lines:
            self._line(label)

    def _line(self, text):
        now = self.clock()
        if now - self.last < self.interval:
            return
        self.last = now
        print(f"symbounds: {self.command}: {text}, {int(now - self.t0)} s", file=self.stream, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``3.5 h``."""
    if seconds < 120:
        return f"{round(seconds)} s"
    if seconds < 7200:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def kernel_verdict(args, full: int, unit: str) -> int:
    """Run the independent checker kernel on ``args.certificate`` after the full check (whose exit
    status is ``full``), print its verdict, and return the command's exit status: 0 only when both
    accept.  ``unit`` names what the kernel re-checks in the progress bar ("boxes", "leaves")."""
    import sys

    import symbounds_kernel

    bar = Bar(args, "box")
    try:
        ok, reason = symbounds_kernel.check_file(
            args.certificate, progress=lambda done, total: bar(done, total, f"{unit} re-checked by the kernel"),
            workers=getattr(args, "workers", 1))
    except symbounds_kernel.Unreadable as e:
        ok, reason = False, str(e)
    finally:
        bar.close()
    print(f"independent kernel: {'accepted' if ok else 'rejected'}: {reason}")
    if not ok and not full:
        print(f"symbounds: certificate rejected by the independent kernel: {reason}", file=sys.stderr)
    return 1 if full or not ok else 0


def written(path) -> None:
    """Every file a command writes is named on stderr, one line each: ``written: PATH``."""
    print(f"written: {path}", file=sys.stderr)


#: the figure file name extensions (matplotlib's own writers: raster PNG, vector SVG and PDF)
FIGURE_FORMATS = (".png", ".svg", ".pdf")

#: significant digits of the numbers in text reports (enclosures stay outward-rounded)
DEFAULT_DIGITS = 12


def add_digits_argument(q) -> None:
    q.add_argument("--digits", type=int, default=DEFAULT_DIGITS, metavar="N",
                   help=f"significant digits of the numbers in the text report (default {DEFAULT_DIGITS}; "
                        "enclosures are widened outward, never narrowed; --json keeps every digit)")


def digits(args) -> int:
    """``--digits``, validated (1..200)."""
    n = args.digits
    if not (1 <= n <= 200):
        raise UsageError(f"--digits {n}: use between 1 and 200")
    return n

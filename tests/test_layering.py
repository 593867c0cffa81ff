"""The package's layers, read from the source with ``ast``.

Rule (docs/adding-a-construction.md):

- ``symbounds.core.*`` (the engine) imports only ``symbounds.core.*``: nothing from
  ``symbounds.papers``, ``symbounds.app`` or the top-level ``symbounds`` package;
- ``symbounds.papers.<key>.*`` imports only ``symbounds.core.*`` and its own
  ``symbounds.papers.<key>.*``; ``symbounds.papers`` itself (the catalogue) may import every paper;
- ``symbounds.app.*`` imports ``symbounds.core``, ``symbounds.papers`` and ``symbounds.app``;
- only ``symbounds/__init__.py`` and ``symbounds/__main__.py`` import ``symbounds.app`` from outside it;
- the graph of explicit import statements between modules of the package has no cycle.

Every import statement counts, those inside functions included.  A relative import is resolved
against the importing module's package; ``from X import name`` is an import of the module
``X.name`` when that is a module (a file or a folder of the package), else of ``X``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = "symbounds"
PACKAGE_DIR = Path(__file__).resolve().parent.parent / ROOT


# ------------------------------------------------------------------------------------------
# The checker


def read_package(folder: Path = PACKAGE_DIR) -> tuple[dict[str, tuple[str, bool]], set[str]]:
    """``({module: (source, is_package)}, every module name)`` of the package in ``folder``.

    Folders without ``__init__.py`` are namespace packages: modules without a source."""
    sources: dict[str, tuple[str, bool]] = {}
    modules: set[str] = set()
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder.parent)
        if path.is_dir():
            if path.name != "__pycache__":
                modules.add(".".join(rel.parts))
            continue
        if path.suffix != ".py":
            continue
        parts = rel.with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules.add(name)
        sources[name] = (path.read_text(encoding="utf-8"), is_package)
    return sources, modules


def imports_of(module: str, source: str, is_package: bool, modules: set[str], root: str = ROOT) -> set[str]:
    """The modules of ``root`` that ``module`` imports (every statement, at any depth)."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level - 1 >= len(parts):
                    raise ValueError(f"{module}: relative import beyond the top-level package")
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m == root or m.startswith(root + ".")}


def import_graph(sources: dict[str, tuple[str, bool]], modules: set[str], root: str = ROOT) -> dict[str, set[str]]:
    """``{module: the modules of the package it imports}`` (itself excluded)."""
    return {m: imports_of(m, src, pkg, modules, root) - {m} for m, (src, pkg) in sources.items()}


def _layer(module: str, root: str) -> tuple[str, ...]:
    """``("core",)``, ``("app",)``, ``("papers",)`` (the catalogue), ``("papers", key)``, or
    ``("top",)`` for the package itself and its ``__main__``."""
    parts = module.split(".")[1:]
    if not parts or parts == ["__main__"]:
        return ("top",)
    if parts[0] == "papers":
        return ("papers",) if len(parts) == 1 else ("papers", parts[1])
    return (parts[0],)


def _allowed(src: tuple[str, ...], dst: tuple[str, ...]) -> bool:
    if src == ("top",):
        return True
    if src == ("core",):
        return dst == ("core",)
    if src[0] == "papers" and len(src) == 2:  # a paper: the engine and its own folder
        return dst in (("core",), src)
    if src == ("papers",):  # the catalogue
        return dst == ("core",) or dst[0] == "papers"
    if src == ("app",):
        return dst in (("core",), ("app",)) or dst[0] == "papers"
    return False  # a module outside the known layers


def violations(graph: dict[str, set[str]], root: str = ROOT) -> list[str]:
    """Each import that breaks the layering rule, as ``"a imports b"``."""
    out = []
    for m in sorted(graph):
        for t in sorted(graph[m]):
            if not _allowed(_layer(m, root), _layer(t, root)):
                out.append(f"{m} imports {t}")
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle ``[a, b, ..., a]`` of the import graph, or None (iterative depth-first search)."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {m: WHITE for m in graph}
    for start in sorted(graph):
        if colour[start] != WHITE:
            continue
        path = [start]
        stack = [iter(sorted(graph[start]))]
        colour[start] = GREY
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                colour[path.pop()] = BLACK
                stack.pop()
                continue
            c = colour.get(nxt, BLACK)  # a module without a source imports nothing
            if c == GREY:
                return path[path.index(nxt):] + [nxt]
            if c == WHITE:
                colour[nxt] = GREY
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


# ------------------------------------------------------------------------------------------
# The package itself


def test_package_follows_the_layering_rule():
    sources, modules = read_package()
    graph = import_graph(sources, modules)
    # the reading found the package (so an empty list below means something)
    assert "symbounds.core.claims" in graph and "symbounds.papers.shi_liao.run" in graph
    assert "symbounds.core.contexts" in graph["symbounds.core.claims"]
    assert violations(graph) == []


def test_package_import_graph_has_no_cycle():
    sources, modules = read_package()
    cycle = find_cycle(import_graph(sources, modules))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# ------------------------------------------------------------------------------------------
# The checker on a small made-up package (it must be able to fail)

_SYNTHETIC = {
    "pkg": ("from .core import eng\n", True),
    "pkg.__main__": ("from .app import cli\n", False),
    "pkg.core.eng": ("import math\nfrom . import util\n", False),
    "pkg.core.util": ("def f():\n    from ..papers.a import cons  # a function-local import\n", False),
    "pkg.papers": ("from .a import cons\nfrom .b import cons as c2\n", True),
    "pkg.papers.a": ("", True),
    "pkg.papers.a.cons": ("from ...core import eng\nfrom .. import b\nfrom . import helper\n", False),
    "pkg.papers.a.helper": ("from pkg.papers.a.cons import thing\n", False),
    "pkg.papers.b": ("", True),
    "pkg.papers.b.cons": ("import pkg.app.cli\n", False),
    "pkg.app.cli": ("from ..papers import a\nfrom pkg.core.eng import f\n", False),
}
_SYNTHETIC_MODULES = set(_SYNTHETIC) | {"pkg.core", "pkg.app"}


def _synthetic_graph():
    return import_graph(_SYNTHETIC, _SYNTHETIC_MODULES, root="pkg")


def test_checker_resolves_imports():
    g = _synthetic_graph()
    assert g["pkg"] == {"pkg.core.eng"}  # "from .core import eng" is the module pkg.core.eng
    assert g["pkg.core.eng"] == {"pkg.core.util"}  # math is not ours
    assert g["pkg.core.util"] == {"pkg.papers.a.cons"}  # function-local, relative two levels up
    assert g["pkg.papers.a.cons"] == {"pkg.core.eng", "pkg.papers.b", "pkg.papers.a.helper"}
    assert g["pkg.papers.a.helper"] == {"pkg.papers.a.cons"}  # "thing" is not a module: the module itself
    assert g["pkg.app.cli"] == {"pkg.papers.a", "pkg.core.eng"}


def test_checker_catches_violations():
    found = violations(_synthetic_graph(), root="pkg")
    assert found == [
        "pkg.core.util imports pkg.papers.a.cons",  # the engine imports a paper
        "pkg.papers.a.cons imports pkg.papers.b",  # a paper imports another paper
        "pkg.papers.b.cons imports pkg.app.cli",  # a paper imports the app
    ]


def _is_cycle(graph, cycle) -> bool:
    return len(cycle) >= 2 and cycle[0] == cycle[-1] and all(b in graph[a] for a, b in zip(cycle, cycle[1:]))


def test_checker_catches_a_cycle():
    g = _synthetic_graph()
    # two cycles: eng -> util -> (function-local) a.cons -> eng, and a.cons <-> a.helper
    cycle = find_cycle(g)
    assert cycle is not None and _is_cycle(g, cycle)
    assert set(cycle) == {"pkg.core.eng", "pkg.core.util", "pkg.papers.a.cons"}
    g["pkg.core.util"] = set()
    cycle = find_cycle(g)
    assert cycle is not None and _is_cycle(g, cycle)
    assert set(cycle) == {"pkg.papers.a.cons", "pkg.papers.a.helper"}
    g["pkg.papers.a.helper"] = set()
    assert find_cycle(g) is None
    # a self-contained three-cycle in a graph given by hand
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_checker_reads_the_top_level_import_of_core_as_a_violation():
    g = {"pkg.core.x": {"pkg"}, "pkg": set()}
    assert violations(g, root="pkg") == ["pkg.core.x imports pkg"]

"""The package's layers, read from the source with ``ast``.

Rule (docs/adding-a-construction.md):

- ``symbounds.core.*`` (the engine) imports only ``symbounds.core.*``: nothing from
  ``symbounds.papers``, ``symbounds.app`` or the top-level ``symbounds`` package;
- ``symbounds.papers.<key>.*`` imports only ``symbounds.core.*`` and its own
  ``symbounds.papers.<key>.*``; ``symbounds.papers`` itself (the catalogue) may import every paper;
- ``symbounds.app.*`` imports ``symbounds.core``, ``symbounds.papers`` and ``symbounds.app``;
- only ``symbounds/__init__.py`` and ``symbounds/__main__.py`` import ``symbounds.app`` from outside it;
- the graph of explicit import statements between modules of the package has no cycle;
- no module imports a private name (one beginning with ``_``) from another module of the package,
  nor reads one as an attribute of another module (``mod._helper``) or of an object whose class is
  defined elsewhere (``model._analyse()``: a private name no line of the module defines); a name two
  modules share is public, with a docstring;
- a construction's module (``symbounds.papers.<key>.*``) never imports through the catalogue
  package ``symbounds.papers`` (``from symbounds.papers import key``, ``from .. import key``): that
  package imports every paper, so the import would run through the registry.

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


def _resolve_from(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module named by ``from <base> import ...`` (relative bases resolved)."""
    if not node.level:
        return node.module or ""
    parts = (module if is_package else module.rpartition(".")[0]).split(".")
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_names(tree: ast.AST) -> set[str]:
    """Every name the module binds: functions, classes, assignments, attributes it sets,
    parameters and import aliases."""
    names: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.attr)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.alias):
            names.add(n.asname or n.name.split(".")[0])
    return names


def private_uses(sources: dict[str, tuple[str, bool]], modules: set[str], root: str = ROOT) -> list[str]:
    """Each use of another module's private name, as ``"a uses b._name"``.

    Three forms: ``from b import _name``; ``b._name`` with ``b`` imported as a module; and
    ``x._name`` where ``_name`` is defined by some other module of the package and nowhere in ``a``
    (a private method or attribute of an object made elsewhere)."""
    trees = {m: ast.parse(src) for m, (src, _) in sources.items()}
    defined = {m: _defined_names(t) for m, t in trees.items()}
    owners: dict[str, set[str]] = {}
    for m, names in defined.items():
        for nm in names:
            if _is_private(nm):
                owners.setdefault(nm, set()).add(m)
    out: list[str] = []
    for m, tree in sorted(trees.items()):
        is_package = sources[m][1]
        module_aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _resolve_from(m, is_package, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules:
                        module_aliases[alias.asname or alias.name] = sub
                    elif _is_private(alias.name) and (base == root or base.startswith(root + ".")) and base != m:
                        out.append(f"{m} uses {base}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in modules:
                        module_aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in module_aliases:
                target = module_aliases[node.value.id]
                if target != m:
                    out.append(f"{m} uses {target}.{node.attr}")
            elif node.attr not in defined[m] and owners.get(node.attr, set()) - {m}:
                out.append(f"{m} uses {ast.unparse(node)} (defined in {min(owners[node.attr] - {m})})")
    return out


def registry_imports(sources: dict[str, tuple[str, bool]], root: str = ROOT) -> list[str]:
    """Each import in a construction's module that goes through the catalogue package."""
    registry = f"{root}.papers"
    out = []
    for m, (src, is_package) in sorted(sources.items()):
        if _layer(m, root)[0] != "papers" or len(_layer(m, root)) != 2:
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.ImportFrom) and _resolve_from(m, is_package, node) == registry:
                out.append(f"{m}:{node.lineno} imports through {registry}")
            elif isinstance(node, ast.Import) and any(a.name == registry for a in node.names):
                out.append(f"{m}:{node.lineno} imports {registry}")
    return out


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


def test_package_uses_no_private_name_of_another_module():
    sources, modules = read_package()
    assert private_uses(sources, modules) == []


def test_constructions_do_not_import_through_the_catalogue():
    sources, _ = read_package()
    assert "symbounds.papers.shi_liao.manifolds.manifold" in sources
    assert registry_imports(sources) == []


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


_PRIVATE = {
    "pkg": ("", True),
    "pkg.core.eng": ("def _helper():\n    pass\nclass M:\n    def _analyse(self):\n        pass\n"
                     "def use(m):\n    return m._analyse(), _helper()\n", False),
    "pkg.core.a": ("from .eng import _helper, M\n", False),  # a private name imported
    "pkg.core.b": ("from . import eng\nx = eng._helper\n", False),  # read off the module
    "pkg.core.c": ("import pkg.core.eng as E\ny = E._helper\n", False),
    "pkg.core.d": ("def f(model):\n    return model._analyse()\n", False),  # another module's method
    "pkg.core.e": ("class N:\n    def _analyse(self):\n        pass\n    def g(self):\n"
                   "        return self._analyse()\n", False),  # its own private method: fine
    "pkg.core.f": ("import flint\nz = flint._private_thing\nfrom .eng import M as _M\n", False),  # not ours; a private alias
    "pkg.papers": ("from .a import cons\n", True),
    "pkg.papers.a": ("", True),
    "pkg.papers.a.cons": ("from .. import a\nfrom . import helper\n", False),  # through the registry
    "pkg.papers.a.helper": ("import pkg.papers\nfrom pkg.papers import a as A\nfrom pkg.papers.a import cons\n", False),
    "pkg.papers.a.sub": ("", True),
    "pkg.papers.a.sub.deep": ("from ... import a\nfrom ..cons import x\n", False),
}
_PRIVATE_MODULES = set(_PRIVATE) | {"pkg.core"}


def test_checker_catches_private_uses():
    found = private_uses(_PRIVATE, _PRIVATE_MODULES, root="pkg")
    assert found == [
        "pkg.core.a uses pkg.core.eng._helper",
        "pkg.core.b uses pkg.core.eng._helper",
        "pkg.core.c uses pkg.core.eng._helper",
        "pkg.core.d uses model._analyse (defined in pkg.core.e)",
    ]


def test_checker_catches_imports_through_the_registry():
    found = registry_imports(_PRIVATE, root="pkg")
    assert found == [
        "pkg.papers.a.cons:1 imports through pkg.papers",
        "pkg.papers.a.helper:1 imports pkg.papers",
        "pkg.papers.a.helper:2 imports through pkg.papers",
        "pkg.papers.a.sub.deep:1 imports through pkg.papers",
    ]

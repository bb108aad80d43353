# -*- test-case-name: tests.test_layering -*-
"""
The package's imports go only down (C{docs/architecture.md}): no import
circle, no wing importing another (the CLI may use the client), and the
shared ground, the execution modules and the runners import no wing.
Imports under C{TYPE_CHECKING} count too.
"""

from __future__ import annotations

import ast
import os

from twisted.trial.unittest import SynchronousTestCase

import salttwist

PACKAGE_DIR = os.path.dirname(os.path.abspath(salttwist.__file__))

#: The wings, each a package of the front ends or daemons.
WINGS = (
    "salttwist.master",
    "salttwist.minion",
    "salttwist.client",
    "salttwist.cli",
    "salttwist.api",
)

#: The imports allowed between wings: the CLI and the REST API are front
#: ends of the client.
ALLOWED_BETWEEN_WINGS = {
    ("salttwist.cli", "salttwist.client"),
    ("salttwist.api", "salttwist.client"),
}


def packageModules() -> dict[str, str]:
    """
    @return: every module of the package by its dotted name, with its path.
    """
    modules = {}
    for root, _, files in os.walk(PACKAGE_DIR):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            relative = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))[: -len(".py")]
            dotted = relative.replace(os.sep, ".").removesuffix(".__init__")
            modules[dotted] = path
    return modules


def importGraph() -> dict[str, set[str]]:
    """
    @return: for each module of the package, the modules of the package it
        imports (C{from a import b} counts C{a.b} when that is a module).
    """
    modules = packageModules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                candidates = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            graph[name].update(c for c in candidates if c in modules and c != name)
    return graph


def wingOf(module: str) -> str | None:
    """
    @return: the wing C{module} belongs to, or L{None} for ground.
    """
    for wing in WINGS:
        if module == wing or module.startswith(wing + "."):
            return wing
    return None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """
    @return: the import circles (strongly connected parts of more than one
        module, or a module importing itself).
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    onStack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Tarjan's algorithm, iterative: the graph is deep enough to make
        # recursion fragile.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        onStack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    onStack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in onStack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    part = []
                    while True:
                        member = stack.pop()
                        onStack.discard(member)
                        part.append(member)
                        if member == node:
                            break
                    if len(part) > 1:
                        found.append(sorted(part))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


class LayeringTests(SynchronousTestCase):
    """
    The import graph of the package as C{docs/architecture.md} draws it.
    """

    def setUp(self) -> None:
        self.graph = importGraph()

    def test_noCircle(self) -> None:
        """
        No module imports, directly or through others, a module that
        imports it.
        """
        self.assertEqual(cycles(self.graph), [])

    def test_wingsApart(self) -> None:
        """
        No wing imports another, but for the CLI using the client.
        """
        sideways = sorted(
            f"{module} -> {imported}"
            for module, imports in self.graph.items()
            for imported in imports
            if wingOf(module)
            and wingOf(imported)
            and wingOf(module) != wingOf(imported)
            and (wingOf(module), wingOf(imported)) not in ALLOWED_BETWEEN_WINGS
        )
        self.assertEqual(sideways, [])

    def test_groundImportsNoWing(self) -> None:
        """
        The shared ground, the execution modules and the runners import no
        wing.
        """
        upward = sorted(
            f"{module} -> {imported}"
            for module, imports in self.graph.items()
            for imported in imports
            if wingOf(module) is None and wingOf(imported) is not None
        )
        self.assertEqual(upward, [])

    def test_cyclesFound(self) -> None:
        """
        L{cycles} finds a circle of three and leaves a chain alone.
        """
        graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
        self.assertEqual(cycles(graph), [["a", "b", "c"]])
        self.assertEqual(cycles({"a": {"b"}, "b": set()}), [])

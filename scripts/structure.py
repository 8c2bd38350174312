"""The package's structure as a newcomer meets it: files, lines, and the import graph's faults.

    python scripts/structure.py            # a table of folders and files over 400 lines, then faults
    python scripts/structure.py --check    # exit 1 if the graph has a circle or an upward edge

Every ``import`` / ``from ... import`` of a ``csan`` module is read with ``ast``, at module level and
inside functions alike (an import hidden in a function is still a dependency). The layers, top to
bottom, are those of ``../shared/STYLE.md``: cli -> bench / experiments -> training -> decoding ->
models -> attention / spatial -> functional -> kernels, with config, errors, machine, text I/O,
checkpoint files, data and evaluation at the bottom. An edge from a lower layer to a higher one is
"upward"; a strongly connected set of modules is a circle. ``csan/__init__.py`` (the public API,
which gathers names from every layer) and ``__main__`` are left out.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src"
LAYERS = [
    ("cli",),
    ("bench", "experiments", "info", "toy"),
    ("training",),
    ("decoding",),
    ("models",),
    ("attention", "spatial"),
    ("functional",),
    ("kernels",),
    ("config", "errors", "machine", "textio", "checkpoint", "data", "evaluation"),
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
SKIP = {"csan", "csan.__main__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> int:
    """The rank of a module's layer: ``csan.<first part>``, ``csan.bench.long`` in ``bench``."""
    first = module.split(".")[1] if "." in module else module
    first = first.split("_")[0] if first.startswith("bench") else first
    return RANK.get(first, len(LAYERS))


def imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The csan modules ``path`` imports (a ``from pkg import name`` of a submodule counts it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [
                f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known
            ]
            names = names or [base]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module and name not in SKIP:
                found.add(name)
    return found


def _own_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").startswith("csan")
    return isinstance(node, ast.Import) and any(a.name.startswith("csan") for a in node.names)


def hidden_imports(path: Path) -> tuple[int, int]:
    """Imports of csan modules inside a function, and inside a ``try``: (count, count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    inner = guarded = 0
    for outer in ast.walk(tree):
        if isinstance(outer, ast.Try):
            guarded += sum(_own_import(n) for stmt in outer.body for n in ast.walk(stmt))
        elif isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner += sum(_own_import(n) for stmt in outer.body for n in ast.walk(stmt))
    return inner, guarded


def graph() -> tuple[dict[str, set[str]], dict[str, Path]]:
    files = {module_name(p): p for p in sorted(ROOT.joinpath("csan").rglob("*.py"))}
    known = set(files)
    edges = {m: imports(p, m, known) for m, p in files.items() if m not in SKIP}
    return edges, files


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 on a circle or an upward edge")
    args = p.parse_args()
    edges, files = graph()
    lines = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in files.items()}
    folders: dict[str, list[int]] = defaultdict(list)
    for m, path in files.items():
        folders[str(path.parent.relative_to(ROOT))].append(lines[m])
    print(f"{len(lines)} files, {sum(lines.values()):,} lines, {len(folders)} folders")
    for folder, counts in sorted(folders.items()):
        print(f"  {folder:<22} {len(counts):>3} files {sum(counts):>6,} lines")
    big = sorted(((n, m) for m, n in lines.items() if n > 400), reverse=True)
    print("files over 400 lines: " + (", ".join(f"{m} ({n})" for n, m in big) or "none"))
    found = circles(edges)
    print(f"import circles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    upward = sorted((a, b) for a, targets in edges.items() for b in targets if layer(b) < layer(a))
    print(f"upward edges (a lower layer importing a higher one): {len(upward)}")
    for a, b in upward:
        print(f"  {a} -> {b}")
    hidden = {m: hidden_imports(path) for m, path in files.items() if m not in SKIP}
    in_functions = {m: n for m, (n, _) in hidden.items() if n}
    in_try = {m: n for m, (_, n) in hidden.items() if n}
    print(
        f"csan imports inside functions: {sum(in_functions.values())} in {len(in_functions)} files"
    )
    print(
        "csan imports inside try: " + (", ".join(f"{m} ({n})" for m, n in in_try.items()) or "none")
    )
    return 1 if args.check and (found or upward or in_try) else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks that no two modules of a crate import each other, directly or around a circle.

For every crate of the workspace (a folder with Cargo.toml and src/), each top-level
module (a file or folder under src/, its submodules included) gets an edge to every other
top-level module it names as `crate::MODULE` outside comments (`use crate::a::B`,
`use crate::{a, b::C}`, or a path in code; a name the crate root re-exports counts as its
module). The crate root (lib.rs, main.rs) re-exports and
declares, so it is left out. A circle of edges is printed with the names that tie it, and
the exit code is 1; none: 0.

    python3 scripts/check-cycles.py [--list]    # --list also prints every module's edges
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATE_PATH = re.compile(r"\bcrate::(\{[^}]*\}|[a-z_][a-z0-9_]*)")


def top_module(src: Path, path: Path) -> str | None:
    rel = path.relative_to(src)
    if len(rel.parts) == 1:
        stem = rel.stem
        return None if stem in ("lib", "main") else stem
    return rel.parts[0]


def names(code: str):
    """The first segment of every `crate::` path in `code`, with the text that names it."""
    for m in CRATE_PATH.finditer(code):
        group = m.group(1)
        if group.startswith("{"):
            for item in group[1:-1].split(","):
                item = item.strip()
                if item:
                    yield item.split("::")[0], item
        else:
            yield group, m.group(0)


def reexports(src: Path) -> dict[str, str]:
    """The names the crate root re-exports (`pub use a::{B, C}`), each with its module."""
    out = {}
    for root in ("lib.rs", "main.rs"):
        path = src / root
        if not path.exists():
            continue
        code = path.read_text()
        for m in re.finditer(r"pub use ([a-z_][a-z0-9_]*)::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)", code):
            items = m.group(2).strip("{}").split(",")
            for item in items:
                item = item.strip().split(" as ")[-1].split("::")[-1]
                if item:
                    out[item] = m.group(1)
    return out


def is_module(src: Path, name: str) -> bool:
    return (src / f"{name}.rs").exists() or (src / name).is_dir()


def edges_of(src: Path) -> dict[str, dict[str, set[str]]]:
    edges: dict[str, dict[str, set[str]]] = {}
    root_names = reexports(src)
    for path in sorted(src.rglob("*.rs")):
        me = top_module(src, path)
        if me is None:
            continue
        edges.setdefault(me, {})
        # Comments are not imports (doc links name modules too).
        code = "\n".join(line.split("//", 1)[0] for line in path.read_text().splitlines())
        for first, text in names(code):
            # `crate::Name` re-exported by the root is the module that defines it.
            target = first if is_module(src, first) else root_names.get(first)
            if target is not None and target != me and is_module(src, target):
                edges[me].setdefault(target, set()).add(f"{path.relative_to(ROOT)}: {text}")
    return edges


def circles(edges: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    listing = "--list" in sys.argv[1:]
    found = 0
    crates = sorted(p.parent for p in ROOT.glob("*/Cargo.toml")) + sorted(
        p.parent for p in ROOT.glob("*/*/Cargo.toml")
    )
    for crate in crates:
        src = crate / "src"
        if not src.is_dir():
            continue
        edges = edges_of(src)
        name = crate.relative_to(ROOT)
        if listing:
            for m in sorted(edges):
                print(f"{name}: {m} -> {', '.join(sorted(edges[m])) or '-'}")
        for circle in circles(edges):
            found += 1
            print(f"{name}: modules that import each other: {' <-> '.join(circle)}")
            for a in circle:
                for b in circle:
                    for why in sorted(edges[a].get(b, ())):
                        print(f"  {a} -> {b}: {why}")
    if found:
        print(
            f"check-cycles: {found} circle(s) of imports between modules; move what both "
            "sides need into a module of its own that neither imports back",
            file=sys.stderr,
        )
        return 1
    print(f"check-cycles: no circle of imports between the modules of {len(crates)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The package's import graph: no cycle, and imports point down the layers
(leaves ← template, data ← model ← encoding ← eval ← search, train ← tui, cli)."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "promptsearch"

# Lower layers never import higher ones; a module may import its own layer.
LAYERS = {
    "errors": 0, "fileio": 0, "paths": 0, "interrupts": 0,
    "template": 1, "representation": 1, "library": 1, "data": 1,
    "model": 2,
    "encoding": 3,
    "eval": 4,
    "search": 5, "train": 5,
    "tui": 6, "cli": 6, "__main__": 6, "__init__": 6,
}


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = list(f.relative_to(PKG).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["promptsearch"] + parts)] = f
    return out


def _imports(name: str, path: Path, modules: dict) -> set[str]:
    """Every promptsearch module ``name`` imports, at module level or inside functions."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                target = base[: len(base) - node.level + 1] + (node.module.split(".") if node.module else [])
            else:
                target = node.module.split(".")
            mod = ".".join(target)
            for alias in node.names:  # "from . import x" may name a submodule
                if f"{mod}.{alias.name}" in modules:
                    found.add(f"{mod}.{alias.name}")
                elif mod in modules:
                    found.add(mod)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
    return {m for m in found if m != name}


def _graph():
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def test_no_import_cycle():
    graph = _graph()
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def test_imports_point_down_the_layers():
    bad = [(m, n) for m, deps in _graph().items() for n in deps if _layer(n) > _layer(m)]
    assert not bad, "upward imports: " + ", ".join(f"{m} -> {n}" for m, n in sorted(bad))


# Modules of one layer that never import each other: what both need lives a layer below (issue 47).
APART = [("train", "search")]


def test_train_does_not_import_search():
    """Not at module level, not inside a function (the graph above reads every import in the tree)."""
    g = _graph()
    bad = [(m, n) for low, high in APART for m, deps in g.items() for n in deps
           if m.split(".")[1:2] == [low] and n.split(".")[1:2] == [high]]
    assert not bad, "train imports search: " + ", ".join(f"{m} -> {n}" for m, n in sorted(bad))


def test_a_function_local_import_is_an_edge(tmp_path):
    """The check above sees an import written inside a function, relative or absolute."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from ..search.scorer import Scorer\n    import promptsearch.search.results\n",
                 encoding="utf-8")
    modules = _modules()
    assert _imports("promptsearch.train.m", f, modules) == {"promptsearch.search.scorer", "promptsearch.search.results"}


def test_the_graph_is_read():  # the checks above see real edges
    g = _graph()
    assert "promptsearch.encoding.prompt" in g["promptsearch.encoding.encoder"]
    assert "promptsearch.eval.sts" in g["promptsearch.search.scorer"]
    assert "promptsearch.model.mask_head" in g["promptsearch.model.loading"]

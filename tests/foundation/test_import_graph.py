"""No import circles: every module of the project's code (`quorum`, `streaming`, `deploy`,
`benchmarks`) is read for its imports, at module level and inside functions alike (a deferred
import that closes a circle only hides it), and the graph must have no cycle. An import names
the module it takes from (`from quorum.raft import RaftNode` the package, `from quorum.raft.node
import RaftNode` the module), so a package re-exporting its modules is no circle."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("quorum", "streaming")
SCRIPT_DIRECTORIES = ("deploy", "benchmarks")  # run as scripts: they import each other by plain name


def module_files() -> dict[str, Path]:
    modules = {}
    for top in PACKAGES + SCRIPT_DIRECTORIES:
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
            if top in SCRIPT_DIRECTORIES and len(parts) == 2:
                modules.setdefault(parts[1], path)  # `import job_lifecycle` beside it
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules `name` imports, anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names)
    return {m for m in found if m in modules and modules[m] != path}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_finder_sees_a_circle_through_a_deferred_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_project_has_no_import_circle():
    modules = module_files()
    assert {"quorum.events", "streaming.job", "quorum.kafka_watch.collector"} <= set(modules)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert "quorum.events" in graph["streaming.decode"]  # the walk sees the imports it must see
    assert cycles(graph) == []

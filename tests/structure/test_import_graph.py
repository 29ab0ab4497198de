"""No import circles: every module of the project's code (`quorum`, `streaming`, `deploy`,
`benchmarks`) is read for its imports, at module level and inside functions alike (a deferred
import that closes a circle only hides it), and the graph must have no cycle. An import names
the module it takes from (`from quorum.raft import RaftNode` the package, `from quorum.raft.node
import RaftNode` the module), so a package re-exporting its modules is no circle.

Nor circles between packages: each sub-package of `quorum`, `streaming` and `deploy` is one node
(a module outside any sub-package, such as `quorum.events`, is a node of its own), with an edge
when any of its modules imports any module of another. Modules without a circle can still tie
two packages both ways, and then neither can be understood, tested or moved without the other."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("quorum", "streaming")
SCRIPT_DIRECTORIES = ("deploy", "benchmarks")  # run as scripts: they import each other by plain name
PACKAGE_TOPS = ("quorum", "streaming", "deploy")  # whose sub-packages are the package graph's nodes


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


def package_of(path: Path) -> str:
    """The package graph's node a module file belongs to: its sub-package (`quorum.node` for
    quorum/node/server.py, `quorum.wire` for quorum/wire/schemas/x.py), else the module itself."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[0] in PACKAGE_TOPS and len(parts) > 2:
        return ".".join(parts[:2])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_graph(modules: dict[str, Path], graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded onto packages; imports within one package drop out."""
    packages: dict[str, set[str]] = {}
    for name, imported in graph.items():
        here = package_of(modules[name])
        packages.setdefault(here, set()).update(package_of(modules[m]) for m in imported)
        packages[here].discard(here)
    return packages


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


def test_a_package_is_named_by_its_sub_package():
    assert package_of(ROOT / "quorum/wire/schemas/__init__.py") == "quorum.wire"
    assert package_of(ROOT / "quorum/node/server.py") == "quorum.node"
    assert package_of(ROOT / "quorum/events.py") == "quorum.events"
    assert package_of(ROOT / "deploy/local_stack.py") == "deploy.local_stack"


def circle_report(circle: list[str], modules: dict[str, Path], graph: dict[str, set[str]]) -> str:
    """The circle's packages, then each import that ties one of them to another of them."""
    lines = [" <-> ".join(circle)]
    for name in sorted(graph):
        here = package_of(modules[name])
        if here not in circle:
            continue
        across = sorted(m for m in graph[name] if package_of(modules[m]) in circle and package_of(modules[m]) != here)
        if across:
            lines.append(f"  {name} imports {', '.join(across)}")
    return "\n".join(lines)


def test_the_project_has_no_package_circle():
    modules = module_files()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    packages = package_graph(modules, graph)
    assert "quorum.kafka_client" in packages["quorum.kafka_watch"]  # the fold keeps the edges it must keep
    found = cycles(packages)
    assert found == [], "packages in an import circle:\n" + "\n".join(
        circle_report(c, modules, graph) for c in found)


def test_no_product_code_imports_the_test_harnesses():
    modules = module_files()
    for name, path in modules.items():
        if package_of(path) != "quorum.testing" and name.split(".")[0] in PACKAGE_TOPS:
            harnesses = {m for m in imports_of(name, path, modules) if package_of(modules[m]) == "quorum.testing"}
            assert not harnesses, f"{name} imports the test harness {', '.join(sorted(harnesses))}"


def test_no_module_of_quorum_mentions_pyspark():
    """Every quorum node imports the event contract and runs without Spark: the events' Spark
    schema is the job's (streaming/event_schema.py), and nothing under quorum/ reaches for
    pyspark, not even in a deferred import."""
    mentions = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "quorum").rglob("*.py")
                      if "pyspark" in path.read_text())
    assert mentions == []

"""The Python client's module layout (STYLE.md, "Python"): no import cycles
between the package's modules, and no private name imported from another
module. Read from the source with ast, so imports inside functions count
too. The generated code under stoker/_proto is left out."""
import ast

from conftest import PYTHON_CLIENT

PACKAGE = PYTHON_CLIENT / "stoker"


def modules():
    """{dotted module name: path} of the package's own modules."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PYTHON_CLIENT).with_suffix("").parts
        if "_proto" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name, path):
    """(imported module, imported names) for each import in the module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            yield base, tuple(a.name for a in node.names)


def graph():
    """{module: {modules of the package it imports}}."""
    found = modules()
    edges = {}
    for name, path in found.items():
        targets = set()
        for module, names in imports(name, path):
            # `from . import errors` imports the module stoker.errors; a
            # package's __init__ runs before any of its modules anyway, so
            # naming it is no edge.
            submodules = [f"{module}.{n}" for n in names
                          if f"{module}.{n}" in found]
            if submodules:
                targets.update(submodules)
            elif module in found and not name.startswith(module + "."):
                targets.add(module)
        targets.discard(name)
        edges[name] = targets
    return edges


def cycles(edges):
    """Every cycle of the graph, each as the list of modules along it."""
    out, state, path = [], {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == "open":
                out.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle():
    edges = graph()
    assert "stoker.stream" in edges and "stoker.torch" in edges
    assert cycles(edges) == []


def test_no_module_imports_a_private_name_of_another():
    found = modules()
    private = []
    for name, path in found.items():
        for module, names in imports(name, path):
            if not module.startswith("stoker"):
                continue
            for n in names:
                # A private module (stoker._call) may be imported; a private
                # name from inside another module may not.
                if n.startswith("_") and f"{module}.{n}" not in found and \
                        not f"{module}.{n}".startswith("stoker._proto"):
                    private.append(f"{path.name}: from {module} import {n}")
    assert private == []

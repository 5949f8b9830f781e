"""The import graph of fedmem/, clients/ and server/: no cycles (function-local imports included), flwr only in the
Flower apps, benches never import tests."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fedmem", "clients", "server")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> set[str]:
    """Every module named by an import anywhere in the file (top level, functions, classes), absolute."""
    tree = ast.parse(path.read_text(), filename=str(path))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    return out


def project_graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {module_name(p): p for p in files}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for imp in imported_names(path):
            # `import a.b.c` also runs a/__init__ and a/b/__init__: the edges go to every package on the way,
            # except a module's own enclosing packages, which Python always initialises before the module
            parts = imp.split(".")
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                if target in modules and target != name and not name.startswith(target + "."):
                    deps.add(target)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def _is_package_import(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def test_find_cycle_sees_a_cycle_through_a_package_init():
    assert find_cycle({"a": {"a.b"}, "a.b": {"c"}, "c": {"a"}}) == ["a", "a.b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    cycle = find_cycle(project_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_only_the_flower_apps_import_flwr():
    offenders = sorted(
        module_name(p) for p in (ROOT / "fedmem").rglob("*.py")
        if any(n == "flwr" or n.startswith("flwr.") for n in imported_names(p))
    )
    assert offenders == []


# The parts of fedmem and what each may import besides itself (each folder's __init__ says the same in words):
# the command line over the Flower apps over running an experiment, over the one config and the reports, over the
# audit methods and federated training's rules, over the model engine, over the data, over the common helpers.
BELOW_DATA = {"fedmem.common"}
ALLOWED = {
    "fedmem.common": set(),
    "fedmem.data": BELOW_DATA,
    "fedmem.engine": BELOW_DATA | {"fedmem.data"},
    "fedmem.federation": BELOW_DATA | {"fedmem.engine"},
    "fedmem.audit": BELOW_DATA | {"fedmem.data", "fedmem.engine"},
    "fedmem.reports": BELOW_DATA | {"fedmem.audit", "fedmem.federation"},
    "fedmem.tracking": BELOW_DATA | {"fedmem.audit", "fedmem.reports"},
    "fedmem.config": BELOW_DATA | {"fedmem.data", "fedmem.engine", "fedmem.federation", "fedmem.audit",
                                   "fedmem.tracking"},
    "fedmem.experiment": BELOW_DATA | {"fedmem.data", "fedmem.engine", "fedmem.federation", "fedmem.audit",
                                       "fedmem.reports", "fedmem.config", "fedmem.tracking"},
    "clients": {"fedmem", "fedmem.common", "fedmem.config", "fedmem.experiment", "fedmem.federation"},
    "server": {"fedmem", "fedmem.common", "fedmem.config", "fedmem.experiment", "fedmem.federation",
               "fedmem.reports", "clients"},
    "fedmem.cli": {"fedmem", "fedmem.common", "fedmem.config", "fedmem.engine", "fedmem.experiment", "fedmem.reports",
                   "server"},
    "fedmem.api": {"fedmem", "fedmem.common", "fedmem.config", "fedmem.experiment", "fedmem.reports", "fedmem.cli",
                   "server"},
}


def part(module: str) -> str:
    """The part a module belongs to: its folder under fedmem/ (``fedmem.cli`` is a part alone), or its top package."""
    names = module.split(".")
    return ".".join(names[:2]) if names[0] == "fedmem" and len(names) > 1 else names[0]


def test_every_module_belongs_to_a_part():
    assert sorted(m for m in project_graph() if part(m) not in ALLOWED and m != "fedmem") == []


def test_parts_import_only_in_their_allowed_directions():
    graph = project_graph()
    wrong = sorted(f"{mod} -> {dep}" for mod, deps in graph.items() for dep in deps
                   if part(dep) != part(mod) and part(dep) not in ALLOWED[part(mod)])
    assert wrong == []


def test_the_allowed_directions_have_no_cycle():
    assert find_cycle({p: {d for d in deps if d in ALLOWED} for p, deps in ALLOWED.items()}) is None


def test_every_part_says_what_it_owns_and_may_import():
    folders = [f for p in ALLOWED if p.startswith("fedmem.") and (f := ROOT / p.replace(".", "/")).is_dir()]
    missing = [f.name for f in folders if len(ast.get_docstring(ast.parse((f / "__init__.py").read_text())) or "") < 80]
    assert missing == []


# fedmem/audit: the shared core (the method interface, the pool, intervals, calibration, the training context, truth,
# agreement, performance) as modules, and a package per method that has parts (mr/, pearl/); a method of one file
# stays a module. The core never imports a method; a method's parts are imported by the method's own package and
# by its view only: everything else asks the registry.
METHOD_PACKAGES = {"fedmem.audit.mr", "fedmem.audit.pearl"}


def method_package(module: str) -> str | None:
    return next((p for p in METHOD_PACKAGES if module == p or module.startswith(p + ".")), None)


def test_the_audit_folder_is_a_core_and_a_package_per_method_with_parts():
    packages = {module_name(p.parent) for p in (ROOT / "fedmem" / "audit").glob("*/__init__.py")}
    assert packages == METHOD_PACKAGES
    for package in METHOD_PACKAGES:  # each says what it owns
        doc = ast.get_docstring(ast.parse((ROOT / package.replace(".", "/") / "__init__.py").read_text())) or ""
        assert len(doc) > 80, package
    graph = project_graph()
    wrong = []
    for mod, deps in graph.items():
        for dep in deps:
            owner = method_package(dep)
            if owner is None or method_package(mod) == owner:
                continue
            view = "fedmem.reports.views." + owner.rpartition(".")[2]
            if mod != view and not (mod == "fedmem.audit" and dep == owner):  # the registry imports each package
                wrong.append(f"{mod} -> {dep}")
    assert sorted(wrong) == []


def test_the_cli_starts_the_flower_apps_only_through_their_entry_point():
    """The run's lifecycle (status, resume, failure) lives in fedmem.experiment.lifecycle; the CLI hands it the simulation."""
    used = {n for n in imported_names(ROOT / "fedmem" / "cli.py") if n.split(".")[0] in ("server", "clients")}
    assert used <= {"server.simulation", "server.simulation.simulate"}, used


def test_audit_methods_compute_and_views_plot():
    """No module of fedmem/audit imports a plotting library or the figure helpers: plots live in fedmem/reports/views."""
    plotting = ("matplotlib", "fedmem.common.io.pyplot", "fedmem.common.io.save_figure")
    offenders = sorted(
        f"{module_name(p)} -> {n}" for p in (ROOT / "fedmem" / "audit").rglob("*.py") for n in imported_names(p)
        if any(n == x or n.startswith(x + ".") for x in plotting)
    )
    assert offenders == []
    assert any("matplotlib" in n or n.endswith(".pyplot") for p in (ROOT / "fedmem" / "reports" / "views").glob("*.py")
               for n in imported_names(p))  # the check above looks at real imports: the views do make plots


def test_benches_never_import_tests():
    offenders = sorted(
        p.name for p in (ROOT / "bench").glob("*.py") if any(n.split(".")[0] == "tests" for n in imported_names(p))
    )
    assert offenders == []


def _sources(*folders: str):
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text()


def test_each_shared_helper_lives_once():
    """Atomic writes, figure saving, config field helpers, metrics, categories and the hand-built Qwen2 model each
    have one home; everything else calls it."""
    homes = {
        "os.replace(": {"fedmem/common/io.py"},  # atomic file output
        ".savefig(": {"fedmem/common/io.py"},
        "tempfile.mkstemp(": {"fedmem/common/io.py"},
        "Qwen2Config(": {"fedmem/engine/model/tiny.py"},
        "def roc_auc(": {"fedmem/audit/calibration.py"},
        "CATEGORIES = ": {"fedmem/audit/mr/detector/config.py"},
        "def option(": {"fedmem/common/fields.py"},
        "metadata={\"help\"": {"fedmem/common/fields.py"},
        "def to_jsonable(": {"fedmem/common/io.py"},
    }
    found = {needle: {name for name, text in _sources("fedmem", "clients", "server", "bench", "tests")
                      if needle in text and name != "tests/test_layering.py"} for needle in homes}
    assert {k: v - homes[k] for k, v in found.items() if v - homes[k]} == {}


def test_no_audit_method_imports_another():
    """An audit method (a module of fedmem/audit, or a package of it, that registers one) uses the shared core
    (fedmem.audit.membership, .calibration, .intervals, .pool, ...) and never another method: the parts two methods
    share live once, in the core, and a method can be removed without breaking another."""
    audit = ROOT / "fedmem" / "audit"

    def unit(path: Path) -> str:  # a method's module, or its package
        rel = path.relative_to(audit).parts
        return "fedmem.audit." + (rel[0] if len(rel) > 1 else path.stem)

    files = [p for p in audit.rglob("*.py") if p.parent != audit or p.stem != "__init__"]
    methods = {unit(p) for p in files if "\n@register\n" in p.read_text()}
    assert {"fedmem.audit.mia", "fedmem.audit.trajectory", "fedmem.audit.mr", "fedmem.audit.pearl"} <= methods
    crossings = sorted((module_name(p), dep) for p in files for dep in imported_names(p)
                       if unit(p) in methods and any(dep == m or dep.startswith(m + ".") for m in methods - {unit(p)}))
    assert crossings == []

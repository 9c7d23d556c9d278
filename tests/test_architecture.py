"""The rules of the layout: seer_metrics stays pure, `seer evaluate` stays light, no import
circles, no test fakes in the product, one module reads the environment and nothing reads it
at import, short modules, few loose modules per package, the Dagster objects under
seer_pipelines/defs."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import seer_metrics


def _modules_loaded_after(code: str) -> set[str]:
    completed = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(completed.stdout.split())


def test_seer_metrics_never_imports_dagster():
    names = [
        module.name
        for module in pkgutil.walk_packages(seer_metrics.__path__, prefix="seer_metrics.")
    ]
    assert "seer_metrics.evaluators.llm" in names
    loaded = _modules_loaded_after("\n".join(f"import {name}" for name in names))
    assert not {name for name in loaded if name.split(".")[0] in {"dagster", "seer_pipelines"}}


def test_seer_evaluate_does_not_load_dagster(tmp_path):
    events = tmp_path / "events.jsonl"
    events.write_text('{"task": "Who directed Inception?", "context": ["Nolan did."]}\n')
    # From the test's directory: the default judgment cache is .seer/ under it.
    loaded = _modules_loaded_after(
        f"import os\nos.chdir({str(tmp_path)!r})\nfrom seer_pipelines.cli import main\n"
        f"assert main(['evaluate', {str(events)!r}]) == 0"
    )
    assert "seer_pipelines.cli.evaluate" in loaded
    assert "dagster" not in loaded


# --- The layout's rules, read from the source with `ast` (nothing is imported) ---

ROOT = Path(__file__).resolve().parents[1]
PRODUCT_PACKAGES = ("seer_metrics", "seer_pipelines")
# The one module that reads the environment; everything else is passed its values.
SETTINGS_MODULE = "seer_pipelines.settings"
# "About 400 lines": a little over is a judgement call, a module of 500 is two modules.
MAX_MODULE_LINES = 420
# No module is exempt from the size rule: the evaluators are packages (issue 16).
LONG_MODULES_ALLOWED_UNDER: str | None = None
# "A handful": more modules than this directly in a product package want a folder.
MAX_LOOSE_MODULES = 8


def product_modules() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the product packages."""
    modules = {}
    for package in PRODUCT_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path, known: Collection[str] = ()) -> set[str]:
    """Every module name `module` imports, at any depth of its code (deferred imports too).

    `from package import name` counts as importing `package.name` when that is one of the
    `known` modules (the package is then only its parent, like `import package.name`),
    else as importing `package` (and, unknown, both names).
    """
    is_package = path.name == "__init__.py"
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in known:
                    names.add(submodule)
                elif known:
                    names.add(source)
                else:
                    names.update({source, submodule})
    return names


def import_graph() -> dict[str, set[str]]:
    modules = product_modules()
    return {
        module: {name for name in imported_names(module, path, modules) if name in modules}
        - {module}
        for module, path in modules.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path (first == last), or None."""
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> list[str] | None:
        if module in visiting:
            return [*visiting[visiting.index(module) :], module]
        if module in done:
            return None
        visiting.append(module)
        for imported in sorted(graph[module]):
            cycle = visit(imported)
            if cycle:
                return cycle
        visiting.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return None


def test_the_cycle_finder_finds_a_circle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_import_graph_sees_relative_and_deferred_imports(tmp_path):
    source = tmp_path / "module.py"
    source.write_text(
        "from . import sibling\nfrom ..other import thing\ndef f():\n    import seer_metrics.x\n"
        "if TYPE_CHECKING:\n    import seer_metrics.only_for_types\n"
    )
    names = imported_names("pkg.sub.module", source)
    assert {"pkg.sub.sibling", "pkg.other", "pkg.other.thing", "seer_metrics.x"} <= names
    # a type-only import is still a dependency of the design: circles through it count
    assert "seer_metrics.only_for_types" in names


def test_no_import_circle_between_modules():
    graph = import_graph()
    assert len(graph) > 20
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_product_code_never_imports_the_test_fakes():
    offenders = {
        module
        for module, path in product_modules().items()
        if any(name.split(".")[0] == "seer_testing" for name in imported_names(module, path))
    }
    assert not offenders


def reads_the_environment(path: Path) -> list[int]:
    """Lines where a module touches `os.environ` / `os.getenv` (or imports them from os)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "environb"}:
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(alias.name in {"environ", "getenv", "environb"} for alias in node.names)
        ):
            lines.append(node.lineno)
    return lines


def test_the_environment_check_sees_reads(tmp_path):
    source = tmp_path / "module.py"
    source.write_text("import os\nfrom os import getenv\nx = os.environ.get('A')\n")
    assert reads_the_environment(source) == [2, 3]


def test_only_the_settings_module_reads_the_environment():
    readers = {
        module: lines
        for module, path in product_modules().items()
        if module != SETTINGS_MODULE and (lines := reads_the_environment(path))
    }
    assert not readers, f"read the environment outside {SETTINGS_MODULE}: {readers}"
    assert reads_the_environment(product_modules()[SETTINGS_MODULE])


# The functions of the settings module that read the environment.
ENVIRONMENT_READERS = frozenset({"setting", "secret", "environment", "load_settings"})
# The one read at import: the code location Dagster, `dg` and the code server load.
IMPORT_TIME_READ = ("seer_pipelines.definitions", "defs")


def import_time_reads(path: Path) -> list[tuple[int, str, str | None]]:
    """Calls of the settings readers that run when the module is imported, as (line,
    reader, name the top-level statement assigns): module statements, class bodies,
    decorators and default values count; function and lambda bodies run later."""
    found: list[tuple[int, str, str | None]] = []

    def visit(node: ast.AST, assigned: str | None) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            arguments = node.args
            evaluated = [*arguments.defaults, *(d for d in arguments.kw_defaults if d)]
            if not isinstance(node, ast.Lambda):
                evaluated.extend(node.decorator_list)
            for child in evaluated:
                visit(child, assigned)
            return
        if isinstance(node, ast.Call):
            function = node.func
            name = getattr(function, "id", None) or getattr(function, "attr", None)
            if name in ENVIRONMENT_READERS:
                found.append((node.lineno, name, assigned))
        for child in ast.iter_child_nodes(node):
            visit(child, assigned)

    for statement in ast.parse(path.read_text(), filename=str(path)).body:
        targets = statement.targets if isinstance(statement, ast.Assign) else []
        assigned = targets[0].id if len(targets) == 1 and isinstance(targets[0], ast.Name) else None
        visit(statement, assigned)
    return found


def test_the_import_time_check_sees_reads_that_run_at_import(tmp_path):
    source = tmp_path / "module.py"
    source.write_text(
        "from s import setting, load_settings\n"
        "HOUR = load_settings().hour\n"  # 2: at import
        "def later(x=setting('A')):\n"  # 3: a default value is evaluated at import
        "    return setting('B')\n"  # a body runs when called
        "@decorate(setting('C'))\n"  # 5: a decorator too
        "def f():\n    pass\n"
        "class Config:\n    name = settings.setting('D')\n"  # 9: a class body too
        "callback = lambda: setting('E')\n"
        "defs = build(load_settings())\n"  # 11
    )
    assert import_time_reads(source) == [
        (2, "load_settings", "HOUR"),
        (3, "setting", None),
        (5, "setting", None),
        (9, "setting", None),
        (11, "load_settings", "defs"),
    ]


def test_nothing_reads_the_environment_at_import():
    """Settings are read when the code location is built (`defs = build_definitions(
    load_settings())`, the one allowed line) or when a resource is used, never by a module
    being imported: two code locations can then be built in one process."""
    readers = {
        module: reads
        for module, path in product_modules().items()
        if module != SETTINGS_MODULE
        and (
            reads := [
                (line, reader)
                for line, reader, assigned in import_time_reads(path)
                if (module, assigned) != IMPORT_TIME_READ
            ]
        )
    }
    assert not readers, f"read the environment at import: {readers}"
    definitions = product_modules()[IMPORT_TIME_READ[0]]
    assert [read[1:] for read in import_time_reads(definitions)] == [("load_settings", "defs")]


IMPORT_EVERY_MODULE_RECORDING_READS = """
import importlib, pkgutil, traceback
import seer_metrics, seer_pipelines, seer_pipelines.settings as settings
reads = []
original = settings._value
def recording(env, name):
    reads.append(name)
    return original(env, name)
settings._value = recording
for package in (seer_metrics, seer_pipelines):
    for module in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
        if module.name not in {"seer_pipelines.definitions", "seer_pipelines.cli.__main__"}:
            importlib.import_module(module.name)
print("without definitions:", sorted(set(reads)))
import seer_pipelines.definitions
print("with definitions:", len(set(reads)))
"""


def test_importing_any_module_reads_no_setting():
    """What the source check cannot see (a module-level call of a function that reads a
    setting): every product module is imported with the one settings lookup recorded."""
    completed = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERY_MODULE_RECORDING_READS],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    lines = completed.stdout.splitlines()
    assert "without definitions: []" in lines, completed.stdout
    # Building `defs` reads every variable, once, through load_settings.
    assert any(
        line.startswith("with definitions: ") and line != "with definitions: 0" for line in lines
    )


def test_no_module_is_longer_than_about_400_lines():
    long_modules = {
        module: length
        for module, path in product_modules().items()
        if (length := len(path.read_text().splitlines())) > MAX_MODULE_LINES
        and not (LONG_MODULES_ALLOWED_UNDER and module.startswith(LONG_MODULES_ALLOWED_UNDER))
    }
    assert not long_modules, f"split by concern: {long_modules}"


def loose_modules(package: str) -> list[str]:
    """The modules directly in `package` (not its __init__, not its subpackages)."""
    return sorted(path.stem for path in (ROOT / package).glob("*.py") if path.stem != "__init__")


def test_each_product_package_has_at_most_a_handful_of_loose_modules():
    for package in PRODUCT_PACKAGES:
        loose = loose_modules(package)
        assert len(loose) <= MAX_LOOSE_MODULES, f"{package} has {len(loose)} loose modules: {loose}"


def test_the_dagster_objects_live_under_seer_pipelines_defs():
    defs = ROOT / "seer_pipelines" / "defs"
    assert (defs / "__init__.py").is_file()
    for kind in ("assets", "checks", "sensors", "resources"):
        assert (defs / kind / "__init__.py").is_file(), f"seer_pipelines/defs/{kind}/ missing"
    assert (defs / "partitions.py").is_file()
    assert (defs / "jobs.py").is_file()


# Dependencies used without an import of their own, and why.
NOT_IMPORTED_DEPENDENCIES = {
    "dagster-webserver": "the UI that `dagster dev` and the webserver container start",
    "dagster-postgres": "the instance storage dagster.yaml names",
    "psycopg2-binary": "the PostgreSQL driver SQLAlchemy loads for postgresql+psycopg2 URLs",
    "dagster-dg-cli": "the `dg` command: `dg check defs` in `make test`, `dg dev`, `dg launch`",
}
IMPORT_NAMES = {"pyyaml": "yaml", "slack-sdk": "slack_sdk"}


def test_every_dependency_is_imported_or_has_a_reason():
    """A dependency nothing uses (as dagster-slack was) fails here."""
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    distributions = {
        re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0] for spec in project["dependencies"]
    }
    modules = product_modules()
    imported = {
        name.split(".")[0]
        for module, path in modules.items()
        for name in imported_names(module, path, modules)
    }
    for distribution in distributions - set(NOT_IMPORTED_DEPENDENCIES):
        module = IMPORT_NAMES.get(distribution, distribution.replace("-", "_"))
        assert module in imported, f"{distribution} is a dependency that nothing imports"
    assert set(NOT_IMPORTED_DEPENDENCIES) <= distributions


def test_loading_the_code_location_does_not_import_the_openai_sdk():
    """Every step process, the daemon and each CLI command load the code location; the
    SDK (about half a second) is imported only by the LLM judge when it is used."""
    loaded = _modules_loaded_after("import seer_pipelines.definitions")
    assert "seer_pipelines.definitions" in loaded
    assert not {name for name in loaded if name.split(".")[0] == "openai"}

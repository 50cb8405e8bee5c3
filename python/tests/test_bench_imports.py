"""The bench scripts' imports of each other resolve (CPU only: the AST, no torch needed).

bench_attention_decode.py imported a bench_ops.py function that a refactor had renamed, and nothing
failed until the script ran on a GPU; this reads every bench/*.py and checks each name it takes from a
sibling module (`from bench_ops import x`, or `import bench_ops` then `bench_ops.x`) is defined there."""
import ast
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))


def top_level_names(tree):
    """Names a module defines at its top level: functions, classes, assignments and imports."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def sibling_uses(tree, siblings):
    """(module, name) pairs the script takes from sibling modules."""
    uses, imported = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in siblings:
            uses += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names if a.name in siblings and a.asname is None)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported:
            uses.append((node.value.id, node.attr))
    return uses


def test_the_bench_folder_has_scripts_that_import_each_other():
    siblings = {p.stem for p in SCRIPTS}
    assert {"bench_ops", "bench_attention_decode", "scaling_ops"} <= siblings
    assert any(sibling_uses(ast.parse(p.read_text()), siblings) for p in SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_name_taken_from_a_sibling_is_defined_there(script):
    siblings = {p.stem: p for p in SCRIPTS}
    defined = {}
    for module, name in sibling_uses(ast.parse(script.read_text()), siblings):
        if module not in defined:
            defined[module] = top_level_names(ast.parse(siblings[module].read_text()))
        assert name in defined[module], f"{script.name}: {module}.{name} is not defined in {module}.py"


def test_a_missing_name_is_caught():
    tree = ast.parse("from bench_ops import no_such_function\nimport bench_ops\nbench_ops.nor_this\n")
    uses = sibling_uses(tree, {"bench_ops"})
    defined = top_level_names(ast.parse((BENCH / "bench_ops.py").read_text()))
    assert [name for _, name in uses if name not in defined] == ["no_such_function", "nor_this"]

# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""No module or action of the collection writes to stdout (or stderr) directly (issue 28).

A module's stdout is its result: the one JSON document exit_json or fail_json writes; anything else printed
there corrupts it. Controller-side code (actions, filters, lookups, plugin_utils) runs in Ansible's worker
processes, whose stdout and stderr ansible-core 2.19+ captures and reports ("WorkerProcess for [...] errantly
sent data directly to stdout instead of using Display"), and under ansible-runner (AWX) such output is no job
event at all. Progress goes through Display, or the task's result and its callback.

Allowed: a command-line entry point of a plugin_utils file (a function called only under
``if __name__ == "__main__":``), which never runs inside Ansible.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PLUGINS = ROOT / "plugins"
FILES = sorted(p for p in PLUGINS.rglob("*.py") if "__pycache__" not in p.parts)
# sys attributes that are the process's own streams
STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}


def _main_entry_points(tree: ast.Module) -> set[str]:
    """The functions called under `if __name__ == "__main__":` at the module's top level."""
    names: set[str] = set()
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
        ):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name):
                    names.add(inner.func.id)
    return names


def direct_writes(path: Path, text: str | None = None) -> list[str]:
    """Where the file (or `text`, as that file) writes to the process's stdout or stderr other than through Display
    or the module's result."""
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text, str(path))
    is_module = path.parent == PLUGINS / "modules"
    allowed = set() if is_module else _main_entry_points(tree)
    found: list[str] = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name if function is None else function
        if function not in allowed:
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{where}: print()")
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
                and node.attr in STREAMS
            ):
                found.append(f"{where}: sys.{node.attr}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "os"
                and node.func.attr == "write"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in (1, 2)
            ):
                found.append(f"{where}: os.write to fd {node.args[0].value}")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, None)
    return found


def test_the_scan_covers_the_collection() -> None:
    kinds = {p.parent.name for p in FILES}
    assert {"action", "modules", "module_utils", "filter", "lookup", "plugin_utils"} <= kinds, kinds


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(PLUGINS)) for p in FILES])
def test_no_direct_stdout(path: Path) -> None:
    found = direct_writes(path)
    assert not found, "writes straight to the process's stdout/stderr (use Display, or the result):\n" + "\n".join(
        found
    )


def test_the_scan_finds_what_it_looks_for() -> None:
    """The scan itself: a print, sys.stdout and os.write(1) are found; a CLI's main is allowed, but not in a module."""
    text = (
        "import os, sys\n"
        "def run():\n    print('x')\n    sys.stdout.write('y')\n    os.write(1, b'z')\n"
        "def main():\n    print('usage', file=sys.stderr)\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    found = direct_writes(PLUGINS / "action" / "sample.py", text)
    assert [line.split(": ", 1)[1] for line in found] == ["print()", "sys.stdout", "os.write to fd 1"], found
    found = direct_writes(PLUGINS / "modules" / "sample.py", text)
    assert [line.split(": ", 1)[1] for line in found][-2:] == ["print()", "sys.stderr"], found

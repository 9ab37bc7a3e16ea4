#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Count the Jinja in the collection's task and playbook files, and list the expressions that hold a rule.

An expression ``{{ ... }}`` "holds a rule" when it chains four or more filters or spans three or more lines: a
decision that belongs in a filter or an action with unit tests (issue 25). Prints the totals, then each such
expression with its file and line; ``--json`` prints the same as one JSON document.

    python tools/jinja_rules.py            # roles/*/tasks, roles/*/handlers, playbooks (and their tasks/)
    python tools/jinja_rules.py --json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXPRESSION = re.compile(r"\{\{(.*?)\}\}", re.S)
STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
MANY_FILTERS = 4
MANY_LINES = 3


def task_files(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """The files whose Jinja runs as tasks: roles' tasks and handlers, and the playbooks (with their task files)."""
    found = [*root.glob("roles/*/tasks/**/*.yml"), *root.glob("roles/*/handlers/**/*.yml")]
    found += [*root.glob("playbooks/**/*.yml")]
    return sorted(set(found))


def filters_in(expression: str) -> int:
    """The filters an expression applies: each ``|`` outside a string (``||`` is not Jinja)."""
    bare = STRING.sub("''", expression)
    return len(re.findall(r"(?<!\|)\|(?!\|)", bare))


def expressions(path: pathlib.Path, root: pathlib.Path = ROOT) -> list[dict[str, object]]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in EXPRESSION.finditer(text):
        body = match.group(1)
        lines = body.count("\n") + 1
        count = filters_in(body)
        found.append(
            {
                "file": str(path.relative_to(root)),
                "line": text.count("\n", 0, match.start()) + 1,
                "filters": count,
                "lines": lines,
                "rule": count >= MANY_FILTERS or lines >= MANY_LINES,
                "text": " ".join(body.split()),
            }
        )
    return found


def survey(root: pathlib.Path = ROOT) -> dict[str, object]:
    every = [e for path in task_files(root) for e in expressions(path, root)]
    rules = [e for e in every if e["rule"]]
    return {
        "files": len({e["file"] for e in every}),
        "expressions": len(every),
        "rules": len(rules),
        "rule_expressions": rules,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--json", action="store_true", help="one JSON document instead of lines")
    args = parser.parse_args(argv)
    found = survey()
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    print(
        f"{found['expressions']} Jinja expressions in {found['files']} task and playbook files; "
        f"{found['rules']} hold a rule ({MANY_FILTERS}+ filters or {MANY_LINES}+ lines):"
    )
    for e in found["rule_expressions"]:  # type: ignore[union-attr]
        print(f"  {e['file']}:{e['line']}  {e['filters']} filters, {e['lines']} lines  {str(e['text'])[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

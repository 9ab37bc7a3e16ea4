# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules live in Python, not Jinja (issue 25): the count of rule-holding expressions only goes down.

tools/jinja_rules.py counts the ``{{ }}`` expressions of the task and playbook files that chain four or more filters
or span three or more lines. Issue 25 found 35 and asks for at most 10; CEILING is where the tree stands now, lowered
as rules move into filters and actions, never raised.
"""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("jinja_rules", ROOT / "tools" / "jinja_rules.py")
assert _spec and _spec.loader
jinja_rules = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jinja_rules)

CEILING = 3  # issue 25: 35 at its filing; the target was 10


def test_no_more_rules_in_jinja_than_the_ceiling() -> None:
    found = jinja_rules.survey(ROOT)
    listed = "\n".join(f"{e['file']}:{e['line']} {e['text'][:100]}" for e in found["rule_expressions"])
    assert found["rules"] <= CEILING, f"{found['rules']} rule-holding Jinja expressions (ceiling {CEILING}):\n{listed}"


def test_filters_are_counted_outside_strings(tmp_path: pathlib.Path) -> None:
    assert jinja_rules.filters_in(" a | b | c('x|y') | d ") == 3
    assert jinja_rules.filters_in(" 'a|b|c|d|e' ") == 0
    assert jinja_rules.filters_in(" a or b ") == 0
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text(
        '- debug:\n    msg: "{{ a | b | c | d | e }}"\n- debug:\n    msg: >-\n      {{ a\n      ~ b\n      ~ c }}\n'
        '- debug:\n    msg: "{{ a | b }}"\n'
    )
    found = jinja_rules.survey(tmp_path)
    assert (found["expressions"], found["rules"]) == (3, 2)
    assert [(e["line"], e["filters"], e["lines"]) for e in found["rule_expressions"]] == [(2, 4, 1), (5, 0, 3)]

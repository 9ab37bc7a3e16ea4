# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Problems found in a serving profile or an inventory, and how they are reported.

Every check in the collection reports a :class:`Problem`: where (file and JSON path, or host and
variable), what was found, what was expected and, where it helps, what to do. Checks collect all
problems before failing, so one run shows everything that is wrong.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.secrets import redact, redact_text

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One thing wrong (error) or worth knowing (warning) about a profile or inventory."""

    where: str
    """JSON path such as ``$.shapes.tp3-triangle.sizing.max_num_seqs``, or ``host spark-w1: dgxspark_rank``."""
    message: str
    found: Any = None
    expected: str = ""
    hint: str = ""
    severity: str = ERROR
    source: str = ""
    """The file the problem is in, when there is one."""
    line: int | None = None
    """The line of the file the JSON path points at (or its nearest parent that exists)."""
    waived: str = ""
    """The check the profile waives (``waivers``), with its reason in the message: a warning the operator accepted,
    which a run lists rather than warns about again."""

    def __post_init__(self) -> None:
        # A problem never repeats a secret (_secrets): what it found, says or hints shows a secret's length only.
        object.__setattr__(self, "found", redact(self.found))
        object.__setattr__(self, "message", redact_text(self.message))
        object.__setattr__(self, "hint", redact_text(self.hint))

    def render(self) -> str:
        source = f"{self.source}:{self.line}" if self.source and self.line else self.source
        location = f"{source}: {self.where}" if source else self.where
        text = f"{location}: {self.message}"
        if self.found is not None:
            text += f" (found {_show(self.found)}"
            text += f"; expected {self.expected})" if self.expected else ")"
        elif self.expected:
            text += f" (expected {self.expected})"
        if self.hint:
            text += f". {self.hint}"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "source": self.source,
            "where": self.where,
            "message": self.message,
            "found": self.found,
            "expected": self.expected,
            "hint": self.hint,
            "line": self.line,
            "text": self.render(),
        }


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


class ProfileError(Exception):
    """Raised with every problem that makes a profile or its plan unusable."""

    def __init__(self, problems: Sequence[Problem], warnings: Sequence[Problem] = ()) -> None:
        self.problems = list(problems)
        self.warnings = list(warnings)
        super().__init__(format_problems(self.problems))


def format_problems(problems: Iterable[Problem], heading: str = "") -> str:
    items = list(problems)
    lines = [heading] if heading else []
    if not heading and items:
        noun = "problem" if len(items) == 1 else "problems"
        lines.append(f"{len(items)} {noun}:")
    lines.extend(f"  - {p.render()}" for p in items)
    return "\n".join(lines)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``did you mean 'x'?`` for the closest known word, or an empty string."""
    known = sorted(set(choices))
    match = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    if not match:
        lowered = {c.lower().replace("-", "_"): c for c in known}
        key = word.lower().replace("-", "_")
        if key in lowered:
            match = [lowered[key]]
    return f"did you mean '{match[0]}'?" if match else ""


@dataclass
class Collector:
    """Accumulates problems for one source file (or one inventory)."""

    source: str = ""
    items: list[Problem] = field(default_factory=list)
    waivers: dict[str, str] = field(default_factory=dict)
    """Check name -> the profile's reason for accepting what the check finds (reported as a warning)."""
    lines: dict[str, int] = field(default_factory=dict)
    """JSON path -> line in the source file, to point at the problem."""

    def _line(self, where: str) -> int | None:
        path = where.split(" ")[0]
        while path.startswith("$"):
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            if cut <= 0:
                return None
            path = path[:cut]
        return None

    def error(
        self, where: str, message: str, found: Any = None, expected: str = "", hint: str = "", check: str = ""
    ) -> None:
        """Record an error; a named ``check`` the profile waives becomes a warning that says why."""
        if check and check in self.waivers:
            message = f"waived {check} ({self.waivers[check]}): {message}"
            self.items.append(
                Problem(where, message, found, expected, hint, WARNING, self.source, self._line(where), check)
            )
            return
        self.items.append(Problem(where, message, found, expected, hint, ERROR, self.source, self._line(where)))

    def warn(
        self, where: str, message: str, found: Any = None, expected: str = "", hint: str = "", check: str = ""
    ) -> None:
        """Record a warning; a named ``check`` the profile waives says why (it stays a warning)."""
        waived = check if check and check in self.waivers else ""
        if waived:
            message = f"waived {check} ({self.waivers[check]}): {message}"
        self.items.append(
            Problem(where, message, found, expected, hint, WARNING, self.source, self._line(where), waived)
        )

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.items if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.items if p.severity == WARNING]

    def raise_if_errors(self) -> None:
        """Raise with every error, each once: a check of the top-level container runs once per shape, and the
        same problem at the same place is one problem, not one per shape."""
        if self.errors:
            raise ProfileError(unique(self.errors), unique(self.warnings))


def unique(problems: Iterable[Problem]) -> list[Problem]:
    """Problems without repeats (the same text), in the order first found."""
    return list({p.render(): p for p in problems}.values())


def json_path(*parts: str | int) -> str:
    """Build ``$.a.b[0]``; keys that are not identifiers are quoted (``$.shapes['tp3 x']``)."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part and all(c.isalnum() or c in "_-" for c in part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out

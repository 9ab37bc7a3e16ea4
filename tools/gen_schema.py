#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write the profile's JSON Schema and its reference page from its definition in plugin_utils.

Usage: tools/gen_schema.py [--check]   (--check: exit 1 if the committed file is out of date)
"""

from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".ansible" / "collections"))

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import PROFILE, SCHEMA_ID  # noqa: E402
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.spec import (  # noqa: E402
    json_schema,
    reference_rows,
)

SCHEMA = ROOT / "schemas" / "serving-profile.v2.schema.json"
REFERENCE = ROOT / "docs" / "profile-reference.md"


def render_schema() -> str:
    schema = json_schema(PROFILE, title="dgxspark.cluster serving profile (schema_version 2)", schema_id=SCHEMA_ID)
    return json.dumps(schema, indent=2) + "\n"


def render_reference() -> str:
    lines = [
        "# Serving profile reference (schema_version 2)",
        "",
        "Generated from `plugins/plugin_utils/profile/schema.py` by `tools/gen_schema.py`; do not edit by hand.",
        "Concepts, checks and examples: [profile.md](profile.md). `<name>` stands for a key you choose.",
        "",
        "| key | type | required | default | meaning |",
        "|---|---|---|---|---|",
    ]
    for path, kind, required, default, doc in reference_rows(PROFILE):
        cells = [f"`{path}`", kind, "yes" if required else "", f"`{default}`" if default else "", doc]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    stale = []
    for target, text in ((SCHEMA, render_schema()), (REFERENCE, render_reference())):
        if "--check" in argv:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(str(target.relative_to(ROOT)))
            continue
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        print(f"out of date: {', '.join(stale)}; run tools/gen_schema.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

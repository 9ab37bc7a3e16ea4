# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The labels the collection puts on the containers it creates: one definition.

The plan writes them (``plugin_utils/plan/plan.py``), node code finds and stops the collection's containers by them
(``_rank_stop``, ``_rank_start``, ``_window_job``), and the preflight and the release report read them. A
container without :data:`RANK_LABEL` or :data:`WINDOW_LABEL` is not the collection's, and is never touched.

No imports: the controller reads these without loading node code.
"""

from __future__ import annotations

LABEL_PREFIX = "dgxspark.cluster"
RANK_LABEL = LABEL_PREFIX + ".rank"
SPEC_LABEL = LABEL_PREFIX + ".spec_sha256"
PROFILE_LABEL = LABEL_PREFIX + ".profile_sha256"
WINDOW_LABEL = LABEL_PREFIX + ".window"

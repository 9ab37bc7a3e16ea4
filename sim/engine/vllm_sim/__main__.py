# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``python3 -m vllm_sim serve MODEL ...`` is the same as the ``vllm`` launcher."""

import sys

from .main import main

sys.exit(main())

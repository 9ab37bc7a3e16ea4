# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether an environment variable's name says it holds a secret: the collection's one rule.

Every part that asks uses :func:`is_secret_name`: node_facts, which never returns such a variable's value
(``_docker_engine.redacted_environment``); the preflight, which shows a differing one as ``***``; the plan,
which refuses one in a rank's environment (``plugin_utils/profile/secrets.py``, which adds the one exception a
refusal needs, a ``*_PATH``/``*_FILE`` variable naming an absolute path); and the vllm_container role's
``no_log``, through the ``dgxspark.cluster.secret_env_names`` filter. Here, so node code can import it too.

The rule, case-insensitive, a secret when the name has:

- ``TOKEN`` not followed by a letter (``HF_TOKEN``, ``HUGGING_FACE_HUB_TOKEN``, ``GITHUBTOKEN``,
  ``HF_TOKEN_PATH``, ``TOKEN2``), except a count per token (``*PER_TOKEN*``, the sim engine's
  ``SIM_ENGINE_KV_BYTES_PER_TOKEN``); ``MAX_TOKENS`` or ``TOKENIZERS_PARALLELISM`` are not;
- ``SECRET``, ``PASSW`` (``PASSWORD``, ``PASSWD``), ``PASSPHRASE``, ``CREDENTIAL`` or ``PRIVATE`` anywhere;
- ``API_KEY``/``APIKEY`` or ``ACCESS_KEY``/``ACCESSKEY`` anywhere, or ``KEY`` as a word of its own
  (``SSH_KEY``, ``KEY_ID``; not ``NCCL_IB_PKEY``, a partition key index, nor ``KEYBOARD``).

It is the union of what the three rules it replaces redacted, less ``TOKEN`` followed by a letter and
``PER_TOKEN``: counts and tokenizers, never secrets, which a plan must be able to set. Over-matching only hides
a value; a secret it missed would be shown, so it leans to matching.

No Ansible imports: a plain function over a string, standard library only, like the rest of module_utils.
"""

from __future__ import annotations

import re

SECRET_NAME = re.compile(
    r"(?<!^PER_)(?<!_PER_)TOKEN(?![A-Z])"  # a token; not a count per token, not TOKENS or TOKENIZER
    r"|SECRET|PASSW|PASSPHRASE|CREDENTIAL|PRIVATE"
    r"|API_?KEY|ACCESS_?KEY|(?:^|_)KEY(?![A-Z])",  # a key; not NCCL_IB_PKEY, not KEYBOARD
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """Whether a variable of this name holds a secret (:data:`SECRET_NAME`), whatever its value."""
    return bool(SECRET_NAME.search(str(name)))

# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether an environment variable's name says it holds a secret: the collection's one rule.

Every part that asks uses :func:`is_secret_name`: node_facts, which never returns such a variable's value
(``_docker_engine.redacted_environment``); the preflight, which shows a differing one as ``***``; the plan,
which refuses one in a rank's environment (``plugin_utils/profile/secrets.py``, which adds the one exception a
refusal needs, a ``*_PATH``/``*_FILE`` variable naming an absolute path); and the vllm_container role's
``no_log``, through the ``dgxspark.cluster.secret_env_names`` filter. Here, so node code can import it too.

The rule, case-insensitive, a secret when the name has, anywhere in it (at its start, in its middle or at its
end, glued to other letters or not):

- ``TOKEN`` (``HF_TOKEN``, ``TOKEN_ID``, ``GITHUBTOKEN``, ``AUTHTOKENVALUE``, ``HF_TOKEN_PATH``), except a count or
  a tokenizer: ``TOKENS`` and ``TOKENIZ...`` (``MAX_TOKENS``, ``TOKENIZERS_PARALLELISM``) and a count per token
  (``*PER_TOKEN*``, the sim engine's ``SIM_ENGINE_KV_BYTES_PER_TOKEN``);
- ``KEY`` (``KEY_ID``, ``SSH_KEY_DATA``, ``VLLM_API_KEY``, ``SIGNINGKEY``), except ``KEYBOARD`` and an InfiniBand
  partition key index (``IB_PKEY``: ``NCCL_IB_PKEY``, ``UCX_IB_PKEY``). ``MONKEY_COUNT`` is a secret's name too:
  the rule knows no English, and a dictionary of harmless words would only ever grow; rename such a variable;
- ``AUTH`` (``HF_AUTH``, ``AUTH_HEADER``, ``PROXY_AUTHORIZATION``, ``BASICAUTH``), except ``AUTHOR``/``AUTHORS`` as
  a word (``GIT_AUTHOR_NAME``);
- ``SECRET``, ``PASSW`` (``PASSWORD``, ``PASSWD``), ``PASSPHRASE``, ``CREDENTIAL`` or ``PRIVATE``.

Over-matching only hides a value (and the plan refuses it: rename the variable or give the secret as a file); a
secret it missed would be shown, so it leans to matching. The exceptions are the few names a serving profile
must be able to set (counts, tokenizers, NCCL's partition key) and nothing else.

No Ansible imports: a plain function over a string, standard library only, like the rest of module_utils.
"""

from __future__ import annotations

import re

SECRET_NAME = re.compile(
    r"(?<!^PER_)(?<!_PER_)TOKEN(?!S|IZ)"  # a token; not a count per token, not TOKENS or TOKENIZER
    r"|(?<!IB_P)KEY(?!BOARD)"  # a key; not NCCL_IB_PKEY (a partition key index), not KEYBOARD
    r"|AUTH(?!ORS?(?![A-Z]))"  # an authorization; not AUTHOR(S) as a word
    r"|SECRET|PASSW|PASSPHRASE|CREDENTIAL|PRIVATE",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """Whether a variable of this name holds a secret (:data:`SECRET_NAME`), whatever its value."""
    return bool(SECRET_NAME.search(str(name)))

# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Token counting and the deterministic answers of the stand-in engine (no model runs).

Token counting: a prompt text of L characters is ``ceil(L / 4)`` tokens (at least 1 for a non-empty
text); a prompt given as a list of token ids is ``len(list)`` tokens. A chat prompt is the rendered
text ``"<role>: <content>\\n"`` per message followed by ``"assistant:"``.

Answers, decided from the text in this order:

1. needle: the question (the last sentence ending in "?" of the last user message, or of the prompt)
   names a key noun (passphrase, password, passkey, pass key, passcode, code, key, number, word, name,
   city) and the prompt contains a fact sentence ``The <up to 4 words ending in that noun> is <X>.``
   (``was`` also accepted; ``<X>`` runs to the first period followed by a space, newline or the end;
   quotes are stripped). The answer is ``The <key> is <X>.``, using the fact whose whole key phrase
   appears in the question (the longest such phrase), else the first fact with the noun.
2. counting: ``count from A to B`` (or ``count to B``, A = 1) answers ``A, A+1, ..., B``.
3. arithmetic: ``what is A + B`` (also -, *, x) answers the number.
4. anything else: deterministic filler text.

Every output token is one word (with its leading space) or punctuation-bearing number: ``1,`` `` 2,``
... so "Count from 1 to 10." is 10 output tokens.
"""

from __future__ import annotations

import re

CHARS_PER_TOKEN = 4

FILLER = (
    "This answer comes from the stand-in engine of the simulated DGX Spark cluster, not from a model. "
    "It repeats deterministic filler text so that a benchmark has tokens to time, and every token "
    "arrives on the schedule that the calibration table of this shape gives for the current concurrency. "
)
_FILLER_WORDS = FILLER.split()

KEY_NOUNS = (
    "passphrase",
    "password",
    "passkey",
    "pass key",
    "passcode",
    "code",
    "key",
    "number",
    "word",
    "name",
    "city",
)
_NOUN_RE = "|".join(sorted((re.escape(n) for n in KEY_NOUNS), key=len, reverse=True))
_FACT_RE = re.compile(
    r"\bthe\s+((?:[\w'-]+\s+){0,3}?(?:" + _NOUN_RE + r"))\s+(?:is|was)\s*:?\s+(.+?)(?:\.(?=\s|$)|\n|$)",
    re.IGNORECASE,
)
_COUNT_RE = re.compile(r"\bcount\s+(?:from\s+(-?\d+)\s+)?(?:to|up\s+to|until)\s+(-?\d+)", re.IGNORECASE)
_ARITH_RE = re.compile(r"\bwhat\s+is\s+(-?\d+)\s*([-+*x\u00d7])\s*(-?\d+)", re.IGNORECASE)
MAX_COUNT_ITEMS = 100000


def count_text_tokens(text: str) -> int:
    if not text:
        return 0
    return -(-len(text) // CHARS_PER_TOKEN)


def content_text(content) -> str:
    """A message's content: a string, or a list of parts whose text parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text"):
                texts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts)
    raise ValueError("content must be a string or a list of content parts")


def render_chat(messages: list) -> tuple[str, str]:
    """The rendered chat prompt and the text of the last user message (where the question is)."""
    parts = []
    last_user = ""
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            raise ValueError("each message needs a 'role'")
        text = content_text(m.get("content"))
        parts.append(f"{m['role']}: {text}\n")
        if m["role"] == "user":
            last_user = text
    parts.append("assistant:")
    return "".join(parts), last_user


def _question(text: str) -> str:
    """The last sentence that ends in '?' (in the last 4000 characters), or the last 300 characters."""
    qs = re.findall(r"[^.?!\n]*\?", text[-4000:])
    return qs[-1] if qs else text[-300:]


def needle_answer(prompt: str, question_source: str) -> str | None:
    question = _question(question_source).lower()
    nouns = [n for n in KEY_NOUNS if re.search(r"\b" + re.escape(n) + r"\b", question)]
    if not nouns:
        return None
    facts = []
    for m in _FACT_RE.finditer(prompt):
        key, value = m.group(1).strip(), m.group(2).strip().strip("\"'\u201c\u201d")
        if re.search(r"\w", value) and not value.endswith("?"):
            facts.append((key, value))
    if not facts:
        return None
    whole = [(key, value) for key, value in facts if key.lower() in question]
    if whole:  # the longest key phrase that the question contains (first one on a tie)
        key, value = max(whole, key=lambda kv: len(kv[0]))
        return f"The {key} is {value}."
    for key, value in facts:  # the key's noun is in the question
        if any(key.lower().endswith(n) for n in nouns):
            return f"The {key} is {value}."
    return None


def count_answer(question: str) -> list[str] | None:
    m = _COUNT_RE.search(question)
    if not m:
        return None
    start = int(m.group(1)) if m.group(1) is not None else 1
    end = int(m.group(2))
    step = 1 if end >= start else -1
    numbers = list(range(start, end + step, step))[:MAX_COUNT_ITEMS]
    return [("" if i == 0 else " ") + str(n) + ("," if i < len(numbers) - 1 else "") for i, n in enumerate(numbers)]


def arith_answer(question: str) -> list[str] | None:
    m = _ARITH_RE.search(question)
    if not m:
        return None
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    result = {"+": a + b, "-": a - b}.get(op, a * b)
    return [str(result)]


def words(text: str) -> list[str]:
    return [("" if i == 0 else " ") + w for i, w in enumerate(text.split())]


def filler(n: int, first: bool = True) -> list[str]:
    out = []
    for i in range(n):
        w = _FILLER_WORDS[i % len(_FILLER_WORDS)]
        out.append(w if (i == 0 and first) else " " + w)
    return out


def garble(tokens: list[str]) -> list[str]:
    """SIM_ENGINE_GARBLE: what a broken stack serves (a functional check must catch it)."""
    junk = ["\u0120\u0120", "<0x0A>", "ktor", "\u00e2\u0122\u013e", "ilerin", "\u0109", "UNUSED", "\ufffd"]
    return [junk[(i * 7 + len(t)) % len(junk)] for i, t in enumerate(tokens)] or [junk[0]]


def answer_tokens(prompt: str, question_source: str) -> tuple[list[str], str]:
    """The natural answer (before max_tokens) and which rule produced it."""
    found = needle_answer(prompt, question_source)
    if found:
        return words(found), "needle"
    counted = count_answer(question_source)
    if counted:
        return counted, "count"
    arith = arith_answer(question_source)
    if arith:
        return arith, "arithmetic"
    return [], "filler"


def apply_stop(tokens: list[str], stops: list[str]) -> tuple[list[str], bool]:
    """Cut the output before the first stop string; True when one was found."""
    if not stops:
        return tokens, False
    text = ""
    for i, tok in enumerate(tokens):
        text += tok
        hits = [text.find(s) for s in stops if s and s in text]
        if hits:
            cut = min(hits)
            keep = tokens[:i]
            already = sum(len(t) for t in keep)
            tail = text[already:cut]
            if tail:
                keep.append(tail)
            return keep, True
    return tokens, False

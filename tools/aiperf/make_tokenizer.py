#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write the stand-in engine's token rule as a local Hugging Face tokenizer, for aiperf offline.

Usage (under .venv-aiperf, which `make venv-aiperf` runs for you):

    .venv-aiperf/bin/python tools/aiperf/make_tokenizer.py OUT_DIR

aiperf wants a Hugging Face tokenizer (`--tokenizer NAME_OR_PATH`) to synthesise prompts of a given
token length; without one it tries the hub (unreachable here), and its `--tokenizer builtin` needs
tiktoken's o200k_base file, which tiktoken also downloads. This writes OUT_DIR/tokenizer.json and
OUT_DIR/tokenizer_config.json, a tokenizer built only with the `tokenizers` package, that counts
text the way the stand-in engine does (sim/engine/README.md, "Token counting"): a text of L
characters is ceil(L / 4) tokens.

How (all deterministic: same aiperf corpus in, same bytes out):

- pre-tokenizer: the text is cut into consecutive pieces of 4 characters (the last one 1-4):
  `Split([\\s\\S]{1,4}, isolated)`, so any text has ceil(L / 4) pieces;
- model: WordPiece with an empty continuation prefix over a vocabulary of every 1-, 2-, 3- and
  4-character string of aiperf's own prompt corpus (aiperf/dataset/generator/assets/shakespeare.txt,
  63 distinct characters, ~80k n-grams, at every offset and across its chunk joins) plus the
  printable ASCII characters: each piece is one token. A piece not in the vocabulary (text from
  outside the corpus) is split into known shorter pieces (2-4 tokens instead of 1, decoding
  exactly), or is `<unk>` when it has a character outside the vocabulary (1 token; decodes as
  "<unk>");
- decoder: Fuse (tokens concatenated, nothing added), so decode(encode(t)) == t for corpus text
  and a prompt of P sampled tokens is ~4P characters: the engine counts it as P tokens;
- no post-processor: no BOS/EOS added to prompts (aiperf's num_prompt_special_tokens is 0).
  `<s>` / `</s>` exist only as bos/eos ids (aiperf uses them as block separators in trace replay).

What it does not reproduce: the engine counts *output* as one token per word (with its leading
space), not per 4 characters. tools/aiperf/run.py therefore passes --use-server-token-count, so
aiperf takes output (and input) token counts from the server's `usage`, not from this tokenizer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

# aiperf's PromptGenerator._initialize_corpus: lines stripped, empty ones dropped, joined with " "
# in chunks of >= 10,000 characters, each chunk tokenised on its own (so the token stream has no
# separator between chunks).
CORPUS_CHUNK_CHARS = 10_000
MAX_PIECE = 4  # sim/engine/vllm_sim/text.py CHARS_PER_TOKEN
SPECIAL = ["<unk>", "<s>", "</s>"]
PIECE_PATTERN = r"[\s\S]{1,4}"


def corpus_path() -> Path:
    from aiperf.dataset.generator import prompt

    return Path(prompt.__file__).parent / prompt.DEFAULT_CORPUS_FILE


def corpus_texts(path: Path) -> list[str]:
    """The corpus as aiperf joins it: whole text with " " between lines, and the chunk stream."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    chunks, buffer, count = [], [], 0
    for line in lines:
        buffer.append(line)
        count += len(line)
        if count >= CORPUS_CHUNK_CHARS:
            chunks.append(" ".join(buffer))
            buffer, count = [], 0
    if buffer:
        chunks.append(" ".join(buffer))
    return [" ".join(lines), "".join(chunks)]


def vocabulary(texts: list[str]) -> dict[str, int]:
    pieces: set[str] = {chr(c) for c in range(0x20, 0x7F)} | {"\n", "\t"}
    for text in texts:
        for n in range(1, MAX_PIECE + 1):
            pieces.update(text[i : i + n] for i in range(len(text) - n + 1))
    pieces.difference_update(SPECIAL)
    ordered = SPECIAL + sorted(pieces, key=lambda s: (len(s), s))
    return {piece: i for i, piece in enumerate(ordered)}


def build(vocab: dict[str, int]):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(
        models.WordPiece(
            vocab=vocab, unk_token="<unk>", continuing_subword_prefix="", max_input_chars_per_word=MAX_PIECE
        )
    )
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(PIECE_PATTERN), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIAL)
    return tok


def check(tok, texts: list[str]) -> None:
    """The rule on slices of the corpus (exact) and on other text (round trip); exit 1 if not."""
    corpus = texts[0]
    lengths = [1, 2, 3, 4, 5, 37, 400, 2049] * 7  # 56 slices spread over the corpus, odd offsets
    step = len(corpus) // len(lengths)
    samples = [corpus[7 + k * step : 7 + k * step + n] for k, n in enumerate(lengths)]
    for text in samples:
        n, want = len(tok.encode(text).ids), -(-len(text) // MAX_PIECE)
        if n != want:
            sys.exit(
                f"make_tokenizer: corpus text {text[:40]!r} ({len(text)} chars) is {n} tokens, the engine counts {want}"
            )
    for text in ["abcd efgh, ijkl!", "Count from 1 to 10.", "x" * 4001, "\n".join(samples[:5])]:
        if tok.decode(tok.encode(text).ids) != text:
            sys.exit(f"make_tokenizer: {text[:40]!r} does not decode back to itself")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="directory to write tokenizer.json and tokenizer_config.json into")
    parser.add_argument("--corpus", type=Path, help="corpus file (default: aiperf's shakespeare.txt)")
    args = parser.parse_args()

    path = args.corpus or corpus_path()
    texts = corpus_texts(path)
    vocab = vocabulary(texts)
    tok = build(vocab)
    check(tok, texts)

    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    tokenizer_json = tok.to_str(pretty=False)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 1 << 30,
        "unk_token": "<unk>",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "add_eos_token": False,
        "name_or_path": "vllm-sim-chars4",
        "vllm_sim_rule": "ceil(len(text) / 4) tokens (sim/engine/README.md, Token counting)",
        "vllm_sim_corpus_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    (out / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / "special_tokens_map.json").write_text(
        json.dumps({"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}, indent=2) + "\n", encoding="utf-8"
    )
    digest = hashlib.sha256(tokenizer_json.encode()).hexdigest()[:16]
    print(f"wrote {out}/tokenizer.json: {len(vocab)} tokens, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A Qwen3-style tokenizer built from Qwen's real BPE ranks (tasks/models/qwen_ranks.py), saved as a Hugging
Face fast tokenizer: what a user's Qwen-family model brings (a 151K-token vocabulary, ChatML, `<think>`,
two end-of-sequence tokens), without downloading a model.

- Ids: the 151,643 ranks are the ids of the BPE tokens; Qwen3's added tokens follow in Qwen3's order, so
  every id is the one a Qwen3 checkpoint uses: <|endoftext|> 151643, <|im_start|> 151644, <|im_end|>
  151645, …, <think> 151667, </think> 151668 (QWEN3_ADDED_TOKENS). The model's vocabulary may be larger
  (Qwen3 pads it to 151,936 rows; tasks/models/presets.py): ids past the tokenizer's decode to nothing.
- Special tokens as Qwen3 marks them: ChatML and vision markers are special (dropped by
  `skip_special_tokens`); tool, fill-in-the-middle and think markers are added but not special, so a
  decoded response keeps its `<think>` block either way. Every added token is matched whole in text,
  never normalised or split.
- eos_token <|im_end|> (the end of an assistant turn), pad_token <|endoftext|>, no bos, no unk;
  padding side right (training pads on the right; the transformers generator pads prompts on the left
  per call, tasks/generation/hf_backend.py).
- Normaliser NFC, then Qwen's pre-tokenizer regex, then byte-level BPE; decoding is byte-level.
- Chat template: tasks/models/chat_template.py (Qwen3's think handling, written for this project).
Building takes a few seconds (reading the ranks and deriving 151K merges), once per process.
"""
from __future__ import annotations

import functools

from transformers import PreTrainedTokenizerFast

from tasks.models.chat_template import THINKING_CHAT_TEMPLATE

FIRST_ADDED_ID = 151643
# (content, special) in id order from FIRST_ADDED_ID, as Qwen3's tokenizer has them
QWEN3_ADDED_TOKENS: list[tuple[str, bool]] = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
    ("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False),
]
QWEN3_VOCAB_ROWS = 151936  # Qwen3's embedding rows (the tokenizer's 151,669 ids, padded)


@functools.cache
def _tokenizer_json() -> str:
    """The `tokenizers` JSON of the Qwen tokenizer (module rules), built once per process."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    from tasks.models.qwen_ranks import QWEN_PATTERN, byte_level_text, merges_from_ranks, ranks_path, read_ranks

    ranks = read_ranks(ranks_path())
    merges = [(byte_level_text(a), byte_level_text(b)) for a, b in merges_from_ranks(ranks)]
    vocab = {byte_level_text(token): rank for token, rank in ranks.items()}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    if len(ranks) != FIRST_ADDED_ID:
        raise ValueError(f"{ranks_path()}: {len(ranks)} ranks, Qwen's vocabulary has {FIRST_ADDED_ID}")
    for offset, (content, special) in enumerate(QWEN3_ADDED_TOKENS):
        token = AddedToken(content, special=special, normalized=False, lstrip=False, rstrip=False,
                           single_word=False)
        (tok.add_special_tokens if special else tok.add_tokens)([token])
        if tok.token_to_id(content) != FIRST_ADDED_ID + offset:  # a content that is also a BPE token
            raise ValueError(f"{content} did not get Qwen3's id {FIRST_ADDED_ID + offset}")
    return tok.to_str()


def qwen_tokenizer() -> PreTrainedTokenizerFast:
    """A new Qwen3-style tokenizer (module rules); RanksMissing (one line) without dashscope installed."""
    from tokenizers import Tokenizer

    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_tokenizer_json()), eos_token="<|im_end|>", pad_token="<|endoftext|>",
        bos_token=None, unk_token=None, padding_side="right", clean_up_tokenization_spaces=False,
        additional_special_tokens=[c for c, special in QWEN3_ADDED_TOKENS[1:] if special])
    fast.chat_template = THINKING_CHAT_TEMPLATE
    return fast

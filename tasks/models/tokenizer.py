"""A byte-level BPE tokenizer trained locally (no model hub) on a text corpus, with a chat template and
`<think>` markers, saved as a Hugging Face fast tokenizer.

- Digits are split one per token (pre-tokenizer `Digits(individual_digits=True)`): arithmetic on tiny
  models learns far faster when numbers are not chunked arbitrarily by BPE merges.
- Special tokens: <|endoftext|> (eos/pad), <|im_start|>, <|im_end|>, <think>, </think>.
- Chat template (ChatML, as Qwen): `<|im_start|>{role}\\n{content}<|im_end|>\\n`…, generation prompt
  `<|im_start|>assistant\\n`. The assistant turn ends with <|im_end|>, which is also an eos id.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

EOS, IM_START, IM_END, THINK_OPEN, THINK_CLOSE = "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"
SPECIAL_TOKENS = [EOS, IM_START, IM_END, THINK_OPEN, THINK_CLOSE]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A tokenizer trained on `texts`; ValueError when they hold no text (BPE would learn no merge and the
    model would read every byte as a token, silently)."""
    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    if not texts:
        raise ValueError("no text to train the tokenizer on (the corpus gives no problem or response)")
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, pad_token=EOS, bos_token=None, unk_token=None,
        additional_special_tokens=[IM_START, IM_END, THINK_OPEN, THINK_CLOSE])
    fast.chat_template = CHAT_TEMPLATE
    return fast


def save_tokenizer(tok: PreTrainedTokenizerFast, out: Path) -> None:
    tok.save_pretrained(str(out))

"""The chat template of the Qwen-vocabulary tokenizer (ChatML turns, Qwen3's `<think>` conventions), and
which token ends an assistant turn for a given tokenizer.

Template rules (THINKING_CHAT_TEMPLATE):
- every message is `<|im_start|>{role}\\n{content}<|im_end|>\\n` (content that is not a string renders empty);
- an assistant message before the last user message is history: when it holds `</think>`, only what follows
  the last `</think>` is kept, its leading newlines dropped (a model's past reasoning is not fed back to it,
  as Qwen3 does); an assistant message after the last user message (the turn being trained or continued)
  keeps its think block;
- `add_generation_prompt` opens the assistant turn, `<|im_start|>assistant\\n`: the model writes `<think>`
  itself. With `enable_thinking=False` the prompt also carries an empty think block,
  `<think>\\n\\n</think>\\n\\n`, so the model answers without reasoning.
So the prompt of one user turn plus a response plus `<|im_end|>` is exactly the rendering of that user
turn and the response as an assistant turn, minus its final newline: what SFT trains on is what the
template renders.
"""
from __future__ import annotations

import json

IM_START, IM_END, THINK_CLOSE = "<|im_start|>", "<|im_end|>", "</think>"

THINKING_CHAT_TEMPLATE = (
    "{%- set state = namespace(last_user=-1) -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' %}{% set state.last_user = loop.index0 %}{% endif -%}"
    "{%- endfor -%}"
    "{%- for message in messages -%}"
    "{%- set text = message['content'] if message['content'] is string else '' -%}"
    "{%- if message['role'] == 'assistant' and loop.index0 < state.last_user and '</think>' in text -%}"
    "{%- set text = text.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + text + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and not enable_thinking %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif -%}"
    "{%- endif -%}"
)


def plain_chat_template(bos: str | None, end: str) -> str:
    """The chat template given to a model that has none (a base model: Gemma 3 270M's GGUF carries no
    template): `User: {content}\n` for a user turn, `Assistant: {content}{end}\n` for an assistant turn,
    `Assistant: ` as the generation prompt, the whole led by the text `bos` when the model's texts start with
    a BOS token (prompts are tokenised without special tokens, so the template writes it). Plain words a base
    model has read in pretraining; `end` is what closes a turn (`end_of_turn`), and SFT teaches the rest."""
    return ("{%- set end = " + json.dumps(end) + " -%}"
            + ("{{- " + json.dumps(bos) + " -}}" if bos else "")
            + "{%- for message in messages -%}"
            "{%- set text = message['content'] if message['content'] is string else '' -%}"
            "{%- if message['role'] == 'assistant' -%}{{- 'Assistant: ' + text + end + '\\n' -}}"
            "{%- else -%}{{- 'User: ' + text + '\\n' -}}{%- endif -%}"
            "{%- endfor -%}"
            "{%- if add_generation_prompt -%}{{- 'Assistant: ' -}}{%- endif -%}")


def give_chat_template(tokenizer, bos: bool) -> bool:
    """`plain_chat_template` as the tokenizer's template when it has none (led by its BOS token when `bos`
    and it has one, each turn closed by `end_of_turn`); whether it was given."""
    if getattr(tokenizer, "chat_template", None):
        return False
    tokenizer.chat_template = plain_chat_template(tokenizer.bos_token if bos else None, end_of_turn(tokenizer))
    return True


def end_of_turn(tokenizer) -> str:
    """The text that closes an assistant turn: `<|im_end|>` when the tokenizer has it as one token (ChatML,
    both tokenizers of tasks/models), else the tokenizer's eos token."""
    token_id = tokenizer.convert_tokens_to_ids(IM_END)
    if token_id is not None and token_id != tokenizer.unk_token_id:
        return IM_END
    if tokenizer.eos_token is None:
        raise ValueError("the tokenizer has neither <|im_end|> nor an eos token: no token ends a turn")
    return tokenizer.eos_token

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


def end_of_turn(tokenizer) -> str:
    """The text that closes an assistant turn: `<|im_end|>` when the tokenizer has it as one token (ChatML,
    both tokenizers of tasks/models), else the tokenizer's eos token."""
    token_id = tokenizer.convert_tokens_to_ids(IM_END)
    if token_id is not None and token_id != tokenizer.unk_token_id:
        return IM_END
    if tokenizer.eos_token is None:
        raise ValueError("the tokenizer has neither <|im_end|> nor an eos token: no token ends a turn")
    return tokenizer.eos_token

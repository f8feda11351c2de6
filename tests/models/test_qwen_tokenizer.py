"""The Qwen-vocabulary tokenizer: the conversion of Qwen's BPE ranks to a Hugging Face tokenizer encodes
exactly as the ranks do (tiktoken over the same file, a test-only reference), Qwen3's added-token ids and
flags, the chat template's think handling, and the one-line error when the ranks are not installed."""
import random
import re
import unicodedata
from pathlib import Path

import pytest

from tasks.models import qwen_ranks
from tasks.models.qwen_tokenizer import FIRST_ADDED_ID, QWEN3_ADDED_TOKENS, qwen_tokenizer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tok():
    return qwen_tokenizer()


def _samples() -> list[str]:
    """Repository text (code, prose, maths) and random strings over scripts, digits, emoji, combining
    marks and whitespace runs: where a wrong merge order or pre-tokenizer would show."""
    texts = [p.read_text() for p in sorted(REPO.glob("docs/*.md"))[:4]]
    texts += [Path(__file__).read_text(), (REPO / "tasks/generation/hf_backend.py").read_text()]
    texts += ["Hello world! 12345 你好，世界。 こんにちは  \n\n  tabs\t\tend", "naïve café Ωmega 😀🤖👩‍👩‍👧",
              "I'M DON'T we'll it's   \r\n\r\n x", "\\boxed{\\frac{3}{4}} = 0.75\n</think>\n\n```python\nprint(1)\n```"]
    rng = random.Random(0)
    alphabet = ([chr(c) for c in range(32, 127)] * 4 + [chr(c) for c in range(0x400, 0x450)]
                + [chr(c) for c in range(0x4E00, 0x4E80)] + [chr(c) for c in range(0x3040, 0x30A0)]
                + ["\U0001F600", "\u200d", "\u0301", "\u00a0", "\u3000", "\n", "\r", "\t", "é", "e", "0", "9"])
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120))) for _ in range(400)]
    return texts


def test_encodes_exactly_as_the_ranks(tok):
    """Text between added tokens (matched whole, e.g. `<think>` in the docs) encodes as the ranks do."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = qwen_ranks.read_ranks(qwen_ranks.ranks_path())
    reference = tiktoken.Encoding("qwen-ranks", pat_str=qwen_ranks.QWEN_PATTERN, mergeable_ranks=ranks,
                                  special_tokens={})
    added = {c: FIRST_ADDED_ID + i for i, (c, _) in enumerate(QWEN3_ADDED_TOKENS)}
    split = re.compile("(" + "|".join(map(re.escape, added)) + ")")
    checked_added = 0
    for text in _samples():
        text = unicodedata.normalize("NFC", text)  # the HF tokenizer normalises first, as Qwen2/Qwen3's
        expected = []
        for i, part in enumerate(split.split(text)):
            expected += [added[part]] if i % 2 else reference.encode_ordinary(part)
            checked_added += i % 2
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == expected, text[:80]
        assert tok.decode(ids) == text
    assert checked_added > 0


def test_merges_replay_the_rank_order():
    """Tokens of a toy rank table: each multi-byte token's merge is the pair the lower ranks build."""
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5, b"cab": 6}
    assert qwen_ranks.merges_from_ranks(ranks) == [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"c", b"ab")]
    with pytest.raises(ValueError, match="not a merge of two lower-ranked tokens"):
        qwen_ranks.merges_from_ranks({b"a": 0, b"b": 1, b"c": 2, b"abc": 3})


def test_added_tokens_have_qwen3_ids_and_flags(tok):
    assert len(tok) == FIRST_ADDED_ID + len(QWEN3_ADDED_TOKENS) == 151669
    ids = {c: FIRST_ADDED_ID + i for i, (c, _) in enumerate(QWEN3_ADDED_TOKENS)}
    assert (ids["<|endoftext|>"], ids["<|im_start|>"], ids["<|im_end|>"]) == (151643, 151644, 151645)
    assert (ids["<think>"], ids["</think>"]) == (151667, 151668)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>" and tok.bos_token is None
    assert tok.padding_side == "right"
    text = "<|im_start|>assistant\n<think>\n1 + 2\n</think>\n\n\\boxed{3}<|im_end|>"
    got = tok(text, add_special_tokens=False)["input_ids"]
    assert [ids["<|im_start|>"], ids["<think>"], ids["</think>"], ids["<|im_end|>"]] == \
        [t for t in got if t >= FIRST_ADDED_ID]
    # think markers are not special: a decoded response keeps them even when specials are skipped
    assert tok.decode(got, skip_special_tokens=True) == "assistant\n<think>\n1 + 2\n</think>\n\n\\boxed{3}"
    # ids past the tokenizer's (Qwen3's padded embedding rows) decode to nothing
    assert tok.decode(got + [151900, 151935]) == tok.decode(got)


def test_chat_template_strips_history_thinking_only(tok):
    turn = "<think>\nadd them\n</think>\n\nThe answer is 3."
    history = [{"role": "user", "content": "1+2?"}, {"role": "assistant", "content": turn},
               {"role": "user", "content": "2+2?"}]
    assert tok.apply_chat_template(history, tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>user\n1+2?<|im_end|>\n<|im_start|>assistant\nThe answer is 3.<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n")
    # the last assistant turn (after the last user turn) keeps its reasoning: what SFT trains on
    prompt = tok.apply_chat_template(history[:1], tokenize=False, add_generation_prompt=True)
    full = tok.apply_chat_template(history[:2], tokenize=False)
    assert full == prompt + turn + "<|im_end|>\n"
    assert prompt == "<|im_start|>user\n1+2?<|im_end|>\n<|im_start|>assistant\n"
    off = tok.apply_chat_template(history[:1], tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert off == prompt + "<think>\n\n</think>\n\n"
    on = tok.apply_chat_template(history[:1], tokenize=False, add_generation_prompt=True, enable_thinking=True)
    assert on == prompt


def test_missing_ranks_is_one_line(monkeypatch, tmp_path):
    monkeypatch.delenv(qwen_ranks.RANKS_ENV, raising=False)
    monkeypatch.setattr(qwen_ranks.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(qwen_ranks.RanksMissing) as err:
        qwen_ranks.ranks_path()
    assert "\n" not in str(err.value) and "pip install dashscope==2.0.2" in str(err.value)
    monkeypatch.setenv(qwen_ranks.RANKS_ENV, str(tmp_path / "absent.tiktoken"))
    with pytest.raises(qwen_ranks.RanksMissing, match=r"^KLEAR_QWEN_RANKS=.*absent.tiktoken: no such file"):
        qwen_ranks.ranks_path()
    (tmp_path / "r.tiktoken").write_text("YQ== 0\n")
    monkeypatch.setenv(qwen_ranks.RANKS_ENV, str(tmp_path / "r.tiktoken"))
    assert qwen_ranks.ranks_path() == tmp_path / "r.tiktoken"


def test_malformed_ranks_file_names_the_line(tmp_path):
    bad = tmp_path / "r.tiktoken"
    bad.write_text("YQ== 0\nnot-base64\n")
    with pytest.raises(ValueError, match=r"r.tiktoken line 2: not 'base64-token rank'"):
        qwen_ranks.read_ranks(bad)

"""The prompt-length bound with the Qwen-vocabulary tokenizer, whose NFC normaliser can make text longer than
its bytes (a Tibetan subjoined letter, 3 bytes, becomes two characters, two tokens): fit_prompts counts the
normalised bytes, so a prompt whose raw bytes fit but whose tokens do not is left out, not sent to a
backend that would refuse it mid-stage; a long Qwen prompt is counted exactly."""
import pytest

from tasks.generation.base import chat_prompt, fit_prompts


@pytest.fixture(scope="module")
def tok():
    from tasks.models.qwen_tokenizer import qwen_tokenizer

    return qwen_tokenizer()


def test_text_that_normalisation_lengthens_is_counted_in_tokens(tok):
    grows = "\u0fb9" * 20  # 60 bytes; NFC: 40 characters, 120 bytes, 120 tokens
    n = len(tok(grows, add_special_tokens=False)["input_ids"])
    assert len(grows.encode()) + 8 <= 100 < n
    fits, too_long = fit_prompts(tok, 100 + 16, [grows, "short"], 16)
    assert fits == [1] and too_long[0].index == 0 and too_long[0].tokens == n and too_long[0].exact


def test_a_chat_prompt_fits_exactly_at_its_token_count(tok):
    prompt = chat_prompt(tok, "Ein Zug fährt 120 km in 1,5 Stunden. 速度は？ " * 20)
    n = len(tok(prompt, add_special_tokens=False)["input_ids"])
    assert fit_prompts(tok, n + 32, [prompt], 32) == ([0], [])
    assert fit_prompts(tok, n + 31, [prompt], 32)[1][0].tokens == n

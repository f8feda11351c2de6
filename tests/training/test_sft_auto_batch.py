"""SFT's batch_size=None ("auto", tasks/training/sft.py auto_batch_size): enough optimizer steps on small
data, the former batch of 16 on large data, explicit settings untouched, one line saying what was chosen."""
import json

import pytest

from tasks.training.config import SFTConfig
from tasks.training.sft import (AUTO_BATCH_MAX, AUTO_BATCH_MIN, AUTO_MIN_STEPS, auto_batch_size,
                                resolve_batch_size)


def _steps(packs, b):
    return sum(-(-n // b) for n in packs)


def test_large_data_keeps_the_largest_batch():
    packs = [AUTO_BATCH_MAX * AUTO_MIN_STEPS] * 2
    assert auto_batch_size(packs) == AUTO_BATCH_MAX


def test_small_data_gets_a_smaller_batch_that_reaches_the_step_target():
    packs = [494] * 8  # the demo's 1,800 worked math examples packed in 512 tokens, 8 epochs
    b = auto_batch_size(packs)
    assert AUTO_BATCH_MIN <= b < AUTO_BATCH_MAX
    assert _steps(packs, b) >= AUTO_MIN_STEPS
    assert b == AUTO_BATCH_MAX or _steps(packs, b + 1) < AUTO_MIN_STEPS  # the largest such batch


def test_tiny_data_stops_at_the_smallest_batch_and_a_step_cap_needs_no_small_batch():
    assert auto_batch_size([10]) == AUTO_BATCH_MIN
    assert auto_batch_size([494] * 8, max_steps=6) == AUTO_BATCH_MAX  # 6 steps of 16 exist: no reason to shrink


def test_an_explicit_batch_is_untouched_and_auto_says_what_it_chose():
    explicit = SFTConfig(epochs=8, batch_size=16)
    assert resolve_batch_size(explicit, [494] * 8, 1800) == (explicit, None)
    cfg, note = resolve_batch_size(SFTConfig(epochs=8), [494] * 8, 1800)
    b = auto_batch_size([494] * 8)
    assert cfg.batch_size == b and cfg.micro_batch_size == min(8, b)
    assert note == (f"batch size {b} (auto: 1,800 examples → {_steps([494] * 8, b):,} steps; "
                    "set --batch-size to override)")


def test_auto_lowers_a_larger_micro_batch_and_the_config_keeps_auto():
    assert SFTConfig().batch_size is None and SFTConfig().micro_batch_size == 8
    cfg, _ = resolve_batch_size(SFTConfig(micro_batch_size=16), [10], 20)
    assert cfg.batch_size == AUTO_BATCH_MIN and cfg.micro_batch_size == AUTO_BATCH_MIN


@pytest.mark.slow  # trains a real (tiny) model for a few steps
def test_train_sft_prints_the_chosen_batch_and_records_it(tmp_path, capfd):
    from tasks.models.factory import init_model
    from tasks.training.sft import train_sft

    rows = [{"problem": f"What is {a} plus {b}?", "response": f"<think>{a} + {b} = {a + b}</think> \\boxed{{{a + b}}}"}
            for a in range(6) for b in range(6)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = init_model(tmp_path / "m", [r["problem"] + r["response"] for r in rows], seed=0)
    res = train_sft(str(model), str(data), str(tmp_path / "o"), SFTConfig(max_steps=3, seq_len=128))
    err = capfd.readouterr().err
    state = json.loads((tmp_path / "o" / "sft_config.json").read_text())
    assert res.steps == 3 and state["config"]["batch_size"] == state["batch_size"]
    assert (f"batch size {state['batch_size']} (auto: 36 examples → 3 steps; set --batch-size to override)"
            in err.splitlines())

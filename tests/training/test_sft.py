import json

import pytest

from tasks.models.factory import init_model
from tasks.training.sft import SFTConfig, latest_checkpoint, train_sft
from tasks.training.sft_data import IGNORE, Example, collate, pack_examples

pytestmark = pytest.mark.slow  # trains or samples a real (tiny) model

ROWS = [{"problem": f"What is {a} plus {b}?", "response": f"<think>\n{a} + {b} = {a + b}\n</think>\n\\boxed{{{a + b}}}"}
        for a in range(8) for b in range(8)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("sft")
    data = d / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    model = init_model(d / "base", [r["problem"] + r["response"] for r in ROWS], seed=0)
    return str(model), str(data), d


def test_packing_keeps_examples_apart():
    exs = [Example([1, 2, 3], [IGNORE, 2, 3]), Example([4, 5], [IGNORE, 5]), Example([6, 7, 8, 9], [IGNORE, 7, 8, 9])]
    packs, trunc = pack_examples(exs, seq_len=6, pad_id=0, seed=0, epoch=0)
    assert trunc == 0 and all(len(p.input_ids) == 6 for p in packs)
    assert sorted(t for p in packs for t, s in zip(p.input_ids, p.segments) if s >= 0) == list(range(1, 10))
    b = collate(packs)
    m = b["attention_mask"][0, 0]
    seg = packs[0].segments
    for i in range(6):
        for j in range(6):
            if seg[i] >= 0 and seg[j] >= 0 and m[i, j]:
                assert seg[i] == seg[j] and j <= i


def test_loss_falls(setup, tmp_path):
    model, data, _ = setup
    res = train_sft(model, data, str(tmp_path / "out"), SFTConfig(epochs=6, batch_size=4, micro_batch_size=2, seq_len=128, save_every=1000))
    assert res.steps > 5 and res.losses[-1] < 0.6 * res.losses[0]
    assert (tmp_path / "out" / "config.json").exists() and (tmp_path / "out" / "loss.png").exists()
    assert (tmp_path / "out" / "metrics.jsonl").read_text().count("\n") == res.steps


def test_micro_batching_does_not_change_the_loss(setup, tmp_path):
    model, data, _ = setup
    a = train_sft(model, data, str(tmp_path / "a"), SFTConfig(max_steps=3, batch_size=4, micro_batch_size=4, seq_len=128))
    b = train_sft(model, data, str(tmp_path / "b"), SFTConfig(max_steps=3, batch_size=4, micro_batch_size=1, seq_len=128))
    assert a.losses == pytest.approx(b.losses, rel=1e-4)


def test_resume_continues_the_same_curve(setup, tmp_path):
    import shutil

    model, data, _ = setup
    cfg = SFTConfig(max_steps=6, batch_size=4, micro_batch_size=2, seq_len=128, save_every=3)
    out = tmp_path / "run"
    full = train_sft(model, data, str(out), cfg)
    assert latest_checkpoint(out).name == "step-6"
    shutil.rmtree(out / "checkpoints" / "step-6")  # as if killed between step 3 and step 6
    resumed = train_sft(model, data, str(out), cfg, resume=True)
    assert resumed.steps == 6
    assert resumed.losses == pytest.approx(full.losses, rel=1e-5)
    assert len(resumed.losses) == 6

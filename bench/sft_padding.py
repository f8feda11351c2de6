"""bench/sft_padding: an SFT micro-batch as padded rows against the same packs joined into one row without their
padding (sft_data.collate_micro_batch, what train_step runs under the packed kernels), on the demo's data.

    python bench/sft_padding.py [--model DIR] [--seq-len 256] [--micro-batch 8] [--batches 60] [--threads N]

Data: the bundled demo's math_chain rows with a response, tokenised as SFT examples and packed as the demo's
SFT packs them (sft_data.pack_examples, seq_len 256, seed 0, epoch 0); micro-batches of 8 packs in order.
Without --model it builds the tiny preset (the demo's model). Each micro-batch runs forward (summed NLL on the
label positions, varlen attention) and backward in both layouts, alternating which goes first, gradients
cleared between; the first 5 batches are warm-up. Prints one JSON line: the packs' fill (real tokens / slots),
median milliseconds per micro-batch of each layout, padded / joined (the speed-up), and the largest relative
difference of the two layouts' losses (float rounding only: the same sums over other row layouts).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="HF model dir (default: build the tiny preset)")
    ap.add_argument("--seq-len", type=int, default=256, help="pack length (the demo's: 256)")
    ap.add_argument("--micro-batch", type=int, default=8, help="packs per micro-batch (the demo's: 8)")
    ap.add_argument("--batches", type=int, default=60, help="micro-batches timed in each layout (after 5)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bench.rl import tiny_model
    from bench.sft import write_examples
    from tasks.training.packed_attention import attn_implementation
    from tasks.training.sft_data import collate, collate_micro_batch, load_sft_rows, pack_examples, tokenize_examples
    from tasks.training.sft_loss import summed_nll

    if a.threads:
        torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory(prefix="bench-sft-padding-") as tmp:
        model_dir = a.model or str(tiny_model(Path(tmp)))
        data = write_examples(Path(tmp), 10**9)  # every demo math_chain row with a response
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                     attn_implementation=attn_implementation("varlen"))
        examples = tokenize_examples(load_sft_rows(str(data)).rows, tok)
    model.config.use_cache = False
    model.train()
    packs, _ = pack_examples(examples, a.seq_len, tok.pad_token_id, seed=0, epoch=0)
    warm = 5
    batches = [packs[i:i + a.micro_batch] for i in range(0, len(packs), a.micro_batch)][:warm + a.batches]
    layouts = {"padded": collate, "joined": lambda b: collate_micro_batch(b, "varlen")}
    ms: dict[str, list[float]] = {k: [] for k in layouts}
    rel = 0.0
    for i, batch in enumerate(batches):
        loss = {}
        for name in (list(layouts) if i % 2 == 0 else list(layouts)[::-1]):
            t0 = time.perf_counter()
            nll = summed_nll(model, model, layouts[name](batch), "varlen")
            nll.backward()
            if i >= warm:
                ms[name].append((time.perf_counter() - t0) * 1e3)
            loss[name] = nll.item()
            model.zero_grad(set_to_none=True)
        rel = max(rel, abs(loss["padded"] - loss["joined"]) / abs(loss["padded"]))
    slots = sum(len(p.segments) for b in batches for p in b)
    real = sum(s >= 0 for b in batches for p in b for s in p.segments)
    med = {k: statistics.median(v) for k, v in ms.items()}
    print(json.dumps({"seq_len": a.seq_len, "micro_batch": a.micro_batch, "batches": len(ms["joined"]),
                      "threads": torch.get_num_threads(), "fill": round(real / slots, 3),
                      "padded_ms": round(med["padded"], 2), "joined_ms": round(med["joined"], 2),
                      "padded_over_joined": round(med["padded"] / med["joined"], 3),
                      "max_rel_loss_diff": rel, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

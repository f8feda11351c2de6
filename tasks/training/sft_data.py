"""SFT data: canonical problems with a response → tokenised (prompt, response) pairs → packed sequences.

- Source: a store directory (the `problems` of its current dataset version) or a canonical .jsonl/.parquet.
  Rows without a response are not SFT examples (counted, not an error); a malformed row is an error
  naming the file and row.
- Example = chat template(problem) as prompt + response + the end of an assistant turn (<|im_end|>, or the
  eos token of a tokenizer without it: tasks/models/chat_template.py `end_of_turn`); loss only on the
  response tokens (labels −100 on the prompt), so the model learns to answer and to stop.
- Packing: examples, shuffled with (seed, epoch), are placed greedily into sequences of `seq_len` tokens;
  each keeps its own positions (position_ids restart at 0) and attends only within itself (block-diagonal
  causal attention), so packing changes speed, never the loss of an example. Longer examples are truncated
  (counted). A batch is a number of packs; the trainer runs a micro-batch's packs as one row without their
  padding (`join_packs`) under the packed kernels, and as padded rows under the dense reference.
- Targets: position t predicts labels[t+1] when token t+1 is of the same document as token t
  (`next_token_labels`): never across the end of a row, an example or padding.
- Attention rule of a packed sequence, from its per-token document ids d (the example index, −1 padding):
      token q may attend to token k  ⇔  (d[q] = d[k] ≥ 0 and k ≤ q)  or  q = k
  (padding attends to itself only: no empty softmax row, and no example ever sees padding). A batch carries
  d itself (O(L)); the attention kernels of tasks/training/sft.py read the rule from it, so the L×L mask
  (1 GiB of booleans per sequence at L = 32K) is built only for the dense reference.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Iterable

from tasks.curation.problems import read_problems
from tasks.generation.base import chat_prompt
from tasks.models.chat_template import end_of_turn

IGNORE = -100


@dataclass
class Example:
    input_ids: list[int]
    labels: list[int]


@dataclass
class SFTRows:
    rows: list[dict]
    dataset: str        # dataset version id (store) or "file:<sha256>" (file)
    skipped_no_response: int


def load_sft_rows(data: str, on_bad: Callable[[str], None] | None = None) -> SFTRows:
    rows, dataset = read_problems(data, on_bad)
    with_resp = [r for r in rows if r.get("response")]
    return SFTRows(with_resp, dataset, len(rows) - len(with_resp))


def tokenize_examples(rows: Iterable[dict], tokenizer, end_token: str | None = None) -> list[Example]:
    end_token = end_token if end_token is not None else end_of_turn(tokenizer)
    out = []
    for r in rows:
        p = tokenizer(chat_prompt(tokenizer, r["problem"]), add_special_tokens=False)["input_ids"]
        a = tokenizer(r["response"] + end_token, add_special_tokens=False)["input_ids"]
        out.append(Example(p + a, [IGNORE] * len(p) + a))
    return out


@dataclass
class Pack:
    input_ids: list[int]
    labels: list[int]
    position_ids: list[int]
    segments: list[int]  # example index within the pack; -1 for padding


def pack_examples(examples: list[Example], seq_len: int, pad_id: int, seed: int, epoch: int,
                  window: int = 64) -> tuple[list[Pack], int]:
    """First-fit packing in a (seed, epoch)-shuffled order: each example goes into the first of the last
    `window` open packs with room for it, else opens a new pack (the oldest open pack is then closed).
    Fills ~88% of the slots on the demo data where next-fit fills ~71%; the window keeps it
    O(n·window) and keeps packs a random mix. Examples longer than `seq_len` are truncated.
    Returns (packs, truncated count)."""
    order = list(range(len(examples)))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    closed: list[Pack] = []
    open_packs: list[Pack] = []
    truncated = 0
    for i in order:
        ex = examples[i]
        ids, labels = ex.input_ids[:seq_len], ex.labels[:seq_len]
        truncated += len(ex.input_ids) > seq_len
        cur = next((p for p in open_packs if len(p.input_ids) + len(ids) <= seq_len), None)
        if cur is None:
            cur = Pack([], [], [], [])
            open_packs.append(cur)
            if len(open_packs) > window:
                closed.append(open_packs.pop(0))
        seg = (cur.segments[-1] + 1) if cur.segments else 0
        cur.input_ids += ids
        cur.labels += labels
        cur.position_ids += list(range(len(ids)))
        cur.segments += [seg] * len(ids)
    packs = closed + open_packs
    for p in packs:
        pad = seq_len - len(p.input_ids)
        p.input_ids += [pad_id] * pad
        p.labels += [IGNORE] * pad
        p.position_ids += [0] * pad
        p.segments += [-1] * pad
    return packs, truncated


def join_packs(packs: list[Pack]) -> Pack:
    """The packs' tokens end to end as one pack, their padding left out: every example keeps its tokens,
    labels and positions, and gets a document id of its own along the row (0, 1, 2, … in order), so the
    attention rule (module docstring) gives each example exactly the attention it had in its own pack. A
    micro-batch joined this way computes no padding token, at a row length of Σ tokens instead of
    len(packs) × seq_len."""
    joined = Pack([], [], [], [])
    doc = -1
    for p in packs:
        last = None
        for tok, lab, pos, seg in zip(p.input_ids, p.labels, p.position_ids, p.segments):
            if seg < 0:
                continue
            if seg != last:
                doc, last = doc + 1, seg
            joined.input_ids.append(tok)
            joined.labels.append(lab)
            joined.position_ids.append(pos)
            joined.segments.append(doc)
    if not joined.input_ids:
        raise ValueError(f"join_packs: {len(packs)} pack(s) with no token but padding: nothing to run")
    return joined


def next_token_labels(labels, document_ids, ignore_index: int = IGNORE):
    """[B, L] labels and document ids → [B, L] targets: position t of a row predicts labels[t+1] when token
    t+1 belongs to the same document as token t, else nothing (`ignore_index`): the last position of a row,
    the last token of an example (whose next token starts another) and padding predict nothing."""
    import torch  # as in collate

    following = torch.cat([labels[:, 1:], labels.new_full((labels.shape[0], 1), ignore_index)], dim=1)
    same = torch.cat([document_ids[:, 1:] == document_ids[:, :-1],
                      torch.zeros_like(document_ids[:, :1], dtype=torch.bool)], dim=1)
    return torch.where(same, following, torch.full_like(following, ignore_index))


def collate(packs: list[Pack], dense_mask: bool = False) -> dict:
    """Batch tensors, O(L) each per sequence: input_ids, labels (already aligned to inputs; shift happens in
    the loss), position_ids and document_ids (Pack.segments: example index within its pack, −1 padding).
    `dense_mask` adds the attention rule (module docstring) materialised as `attention_mask`
    (dense_attention_mask), for a caller that runs the model on the mask itself (the tests' references); the
    trainers leave it out: packed_attention.attention_inputs makes it where the dense path runs."""
    import torch  # here, not at import: the CLI reads SFT rows (load_sft_rows) without torch

    seg = torch.tensor([p.segments for p in packs], dtype=torch.long)
    out = {
        "input_ids": torch.tensor([p.input_ids for p in packs], dtype=torch.long),
        "labels": torch.tensor([p.labels for p in packs], dtype=torch.long),
        "position_ids": torch.tensor([p.position_ids for p in packs], dtype=torch.long),
        "document_ids": seg,
    }
    if dense_mask:
        out["attention_mask"] = dense_attention_mask(seg)
    return out


def dense_attention_mask(document_ids):
    """The attention rule (module docstring) of a [B, L] tensor of document ids materialised as a 4-D boolean
    [B, 1, L, L] block-diagonal causal mask (True = may attend), on their device: the dense reference, O(L²)."""
    import torch  # as in collate

    t, dev = document_ids.shape[1], document_ids.device
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=dev))
    same = (document_ids[:, :, None] == document_ids[:, None, :]) & (document_ids[:, :, None] >= 0)
    return ((causal[None] & same) | torch.eye(t, dtype=torch.bool, device=dev)[None])[:, None]


def collate_micro_batch(packs: list[Pack], attention: str) -> dict:
    """A micro-batch's tensors under a resolved attention (packed_attention.resolve_attention): the packed
    kernels (flex, varlen) take the packs joined into one row without padding (join_packs), the dense
    reference takes them as padded rows (packed_attention.attention_inputs makes their mask when it runs)."""
    return collate(packs) if attention == "dense" else collate([join_packs(packs)])


def target_count(batch: dict) -> int:
    """How many positions of a collated batch predict a label (next_token_labels): the tokens a step's loss
    averages over, the same in either layout of collate_micro_batch."""
    return int((next_token_labels(batch["labels"], batch["document_ids"]) != IGNORE).sum())


def document_spans(document_ids) -> list[tuple[int, int, int, bool]]:
    """(row, start, end, padding) for each maximal run of one document id in each row of a [B, L] tensor of
    document ids, in order (the runs of a row tile [0, L)); `padding` marks a run of −1. Under the attention
    rule (module docstring) a document run attends causally within itself and a padding token to itself
    only; pack_examples puts each example in one run (ids that recurred after a gap would count as two
    documents here)."""
    import torch  # as above

    spans = []
    for row, d in enumerate(document_ids.cpu()):
        cuts = [0] + (torch.nonzero(d[1:] != d[:-1]).flatten() + 1).tolist() + [len(d)]
        spans += [(row, s, e, bool(d[s] < 0)) for s, e in zip(cuts, cuts[1:])]
    return spans

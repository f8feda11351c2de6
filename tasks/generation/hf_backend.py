"""transformers `generate` backend (CPU or GPU). Left-pads prompt batches; sampling is seeded per call
so the same model, prompts and seed give the same completions."""
from __future__ import annotations

from typing import Sequence

import torch

from tasks.generation.base import Completion, SamplingParams


class HFGenerator:
    def __init__(self, model, tokenizer, batch_size: int = 64):
        self.model, self.tok, self.batch_size = model, tokenizer, batch_size
        self.tok.padding_side = "left"
        eos = model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos])

    @classmethod
    def from_pretrained(cls, path: str, device: str | None = None, **kw) -> "HFGenerator":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        model = AutoModelForCausalLM.from_pretrained(path).to(device).eval()
        return cls(model, AutoTokenizer.from_pretrained(path), **kw)

    @torch.no_grad()
    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        out: list[list[Completion]] = []
        per_batch = max(1, self.batch_size // params.n)
        gen = torch.Generator(device="cpu").manual_seed(params.seed)
        for start in range(0, len(prompts), per_batch):
            batch = list(prompts[start:start + per_batch])
            torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
            out.extend(self._generate_batch(batch, params))
        return out

    def _generate_batch(self, prompts: list[str], p: SamplingParams) -> list[list[Completion]]:
        enc = self.tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.model.device)
        greedy = p.temperature <= 0
        res = self.model.generate(
            **enc, max_new_tokens=p.max_tokens, do_sample=not greedy, num_return_sequences=p.n,
            temperature=None if greedy else p.temperature, top_p=None if greedy else p.top_p, top_k=None,
            output_logits=True, return_dict_in_generate=True, pad_token_id=self.tok.pad_token_id)
        new = res.sequences[:, enc["input_ids"].shape[1]:]
        logits = torch.stack(res.logits, dim=1).float()  # (B*n, T, V) raw logits
        lp = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        comps = []
        for row, row_lp in zip(new.tolist(), lp.tolist()):
            ids, stop = [], "length"
            for t in row:
                ids.append(t)  # the eos token stays in token_ids: training must learn to stop
                if t in self.eos_ids:
                    stop = "stop"
                    break
            text_ids = ids[:-1] if stop == "stop" else ids
            comps.append(Completion(self.tok.decode(text_ids, skip_special_tokens=False), ids, row_lp[:len(ids)], stop))
        return [comps[i * p.n:(i + 1) * p.n] for i in range(len(prompts))]

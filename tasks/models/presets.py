"""Model presets for `klear model init`: Qwen2/Qwen3-architecture causal LMs with random weights.

Why these numbers:
- head_dim = hidden / heads = 32: vLLM's CPU attention rejects head_dim 16, and 32 is the smallest it takes.
- tiny (~0.4M params with a 512-token vocab): learns the demo's step-by-step arithmetic from a few thousand
  examples in minutes on 2 CPU cores; 2 layers suffice (each CoT line copies one operation from the prompt
  and applies one table fact) and cost half of 4 on CPU, where the demo's time goes.
- small (~4M params): still CPU-trainable, for a stronger demo or a first GPU smoke test.
- GQA (kv heads = heads/2) and tied embeddings, as Qwen2/Qwen3 small models do.
- max_position_embeddings 1024: demo prompts + responses are < 256 tokens; room to grow.
- qwen3-tiny: tiny's shape as a Qwen3 model (q/k norms, no q/k/v biases) with Qwen's real vocabulary
  (tasks/models/qwen_tokenizer.py: 151,669 ids, ChatML, `<think>`, two eos ids) and Qwen3's 151,936
  embedding rows, tied: the embedding is almost all of its ~20M parameters and the lm_head's logits
  (151,936 per position) dominate its compute, as they do for a real small Qwen model; what a user's Qwen
  checkpoint brings to SFT, rollouts, rewards and evaluation, at a size that still trains on a CPU.
  rope_theta 1e6 as Qwen3.

Fields besides the HF config's: `architecture` (qwen2 | qwen3: transformers' Qwen2/Qwen3ForCausalLM) and
`vocabulary` ("trained": a byte-level BPE of `vocab_size` trained on the corpus, tasks/models/tokenizer.py;
"qwen": Qwen's tokenizer, whose ids fill the first rows of `vocab_size`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ModelPreset:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    max_position_embeddings: int = 1024
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = True
    architecture: str = "qwen2"
    vocabulary: str = "trained"

    def to_dict(self) -> dict:
        """The fields an HF Qwen2Config/Qwen3Config takes (not `architecture`, `vocabulary`)."""
        return {k: v for k, v in asdict(self).items() if k not in ("architecture", "vocabulary")}


PRESETS: dict[str, ModelPreset] = {
    "tiny": ModelPreset(hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, vocab_size=512),
    "small": ModelPreset(hidden_size=256, intermediate_size=768, num_hidden_layers=6,
                         num_attention_heads=8, num_key_value_heads=4, vocab_size=2048),
    "qwen3-tiny": ModelPreset(hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, vocab_size=151936,
                              rope_theta=1e6, architecture="qwen3", vocabulary="qwen"),
}

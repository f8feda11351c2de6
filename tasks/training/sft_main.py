"""Entry point for one SFT rank, as launched by torchrun (see launch.py):

    python -m torch.distributed.run --nproc_per_node N -m tasks.training.sft_main MODEL DATA OUT CONFIG_JSON [--resume]
"""
from __future__ import annotations

import json
import sys

from tasks.training.sft import SFTConfig, train_sft


def main(argv: list[str]) -> None:
    model, data, out, cfg_json, *rest = argv
    train_sft(model, data, out, SFTConfig(**json.loads(cfg_json)), resume="--resume" in rest)


if __name__ == "__main__":
    main(sys.argv[1:])

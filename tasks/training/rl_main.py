"""Entry point for one RL rank, as launched by torchrun (see launch.py):

    python -m torch.distributed.run --nproc_per_node N -m tasks.training.rl_main MODEL DATA OUT CONFIG_JSON [--resume]
"""
from __future__ import annotations

import sys

from tasks.training.rl import train_rl


def main(argv: list[str]) -> None:
    from tasks.training.launch import config_from_json

    model, data, out, cfg_json, *rest = argv
    train_rl(model, data, out, config_from_json(cfg_json), resume="--resume" in rest)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Training metrics: one JSON line per step (`metrics.jsonl`) and TensorBoard scalars (charts: tasks/reporting.py)."""
from __future__ import annotations

import json
import math
from pathlib import Path


class NonFiniteLoss(ValueError):
    """A training step's loss or gradient norm is NaN or infinite: the update is not applied and the run
    stops, so no model of broken weights is saved or registered (a NaN never trains back to a number)."""


def check_finite(where: str, loss: float, grad_norm: float, lr: float) -> None:
    """Raise NonFiniteLoss (one line: where — `SFT step 12` —, the values, the learning rate) unless both are
    finite. Call it with figures every rank shares (reduced), so all ranks stop at the same update."""
    if not (math.isfinite(loss) and math.isfinite(grad_norm)):
        raise NonFiniteLoss(f"{where}: loss {loss}, gradient norm {grad_norm}: stopped before this "
                            f"update, no model saved or registered (learning rate {lr:g}; a lower --lr, or the "
                            "data, is the usual fix)")


class MetricsLog:
    def __init__(self, out: Path, resume_from_step: int | None = None):
        self.path = Path(out) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_from_step is None:
            self.path.write_text("")
        elif self.path.exists():  # drop lines written after the checkpoint we resume from
            keep = [json.dumps(r) for r in _rows(self.path, torn_tail_ok=True) if r["step"] <= resume_from_step]
            self.path.write_text("".join(l + "\n" for l in keep))
        self._tb = None
        try:
            from torch.utils.tensorboard import SummaryWriter
            self._tb = SummaryWriter(str(Path(out) / "tb"), purge_step=resume_from_step + 1 if resume_from_step else None)
        except ImportError:  # tensorboard is optional at runtime
            pass

    def log(self, step: int, values: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, **values}) + "\n")
        if self._tb:
            for k, v in values.items():
                if isinstance(v, (int, float)):
                    self._tb.add_scalar(k, v, step)

    def read(self) -> list[dict]:
        return read_metrics(self.path.parent)

    def close(self) -> None:
        if self._tb:
            self._tb.close()


def _rows(path: Path, torn_tail_ok: bool = False) -> list[dict]:
    """The JSON lines of `path`. `torn_tail_ok`: a last line cut short (the run was killed while writing
    it; it has no newline) is dropped: the step it logged is retrained after the resume anyway."""
    text = path.read_text()
    lines = text.splitlines()
    rows = []
    for i, line in enumerate(lines):
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if torn_tail_ok and i == len(lines) - 1 and not text.endswith("\n"):
                break
            raise ValueError(f"{path} line {i + 1}: not JSON") from None
    return rows


def read_metrics(out: Path) -> list[dict]:
    path = Path(out) / "metrics.jsonl"
    return _rows(path) if path.exists() else []

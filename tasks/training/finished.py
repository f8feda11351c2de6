"""A trainer's output directory that already holds the finished run a command asks for: "a stage whose
result exists is not run again", for `klear sft` and `klear rl` as for the pipeline's cached stages.

A run is finished when its run file (sft_config.json / rl_config.json), the final model (config.json and
weights) and the checkpoint of its last step are all in `out`, and the model's lineage file was written after
every file of the model (storage.checkpoints.current_lineage_id): the run registers the model once its save is
complete, so a save cut short (Ctrl-C while config.json is being written) is no finished run. It is the same
run when the model and data are named the same, the data resolves to the same dataset version (a store's
current version moves when a newer one lands, e.g. difficulty tags) and every setting is as requested then —
the settings as given, not as resolved (an `auto` batch size or attention is the same request whatever it
became). A run file written before runs recorded their requested settings never matches (the caller then
refuses as before).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from storage.checkpoints import current_lineage_id
from tasks.training.checkpoint import checkpoint_step

RUN_FILES = {"sft": "sft_config.json", "rl": "rl_config.json"}


@dataclass
class FinishedRun:
    steps: int
    dataset: str
    differences: list[str]  # what differs from the run asked for, one phrase each; [] = the same run


def finished_run(out: Path | str, stage: str, model: str, data: str, dataset: str,
                 requested: dict) -> FinishedRun | None:
    """The finished `stage` run in `out` compared with the one asked for (module rules), or None."""
    out = Path(out)
    try:
        record = json.loads((out / RUN_FILES[stage]).read_text())
    except (OSError, ValueError):
        return None
    steps = record.get("total_steps") if stage == "sft" else (record.get("config") or {}).get("steps")
    last = out / "checkpoints" / f"step-{steps}"
    weights = any(out.glob("*.safetensors"))
    if not (isinstance(steps, int) and (out / "config.json").is_file() and weights and last.is_dir()
            and checkpoint_step(last) == steps and current_lineage_id(out)):
        return None
    was = record.get("requested")
    diffs = [] if was is not None else ["its settings were not recorded as requested"]
    for what, old, new in (("model", record.get("model"), model), ("data", record.get("data"), data),
                           ("dataset version", record.get("dataset"), dataset)):
        if str(old) != str(new):
            diffs.append(f"{what} {old} → {new}")
    if was is not None:
        now = json.loads(json.dumps(requested))  # tuples as the JSON record holds them: lists
        diffs += [f"{key} {was.get(key)!r} → {now.get(key)!r}" for key in sorted(set(was) | set(now))
                  if was.get(key) != now.get(key)]
    return FinishedRun(steps, str(record.get("dataset")), diffs)

"""Alarms for data a pipeline run would otherwise degrade in silence: a run that ends Completed while a whole
class of the user's rows was lost, or read through the wrong fields, says so loudly (a warning in the run's
log and its report artifact), and with `strict` fails instead (PipelineConfig.strict).

Rules:
- layout hint (before curation): a source read with the canonical layout whose first row carries a field that
  a named layout reads and the canonical one does not (layouts.LAYOUT_HINTS: `generations`, the R1 reasoning traces
  of OpenR1; `solutions` and `input_output`, TACO/APPS references and tests; `conversations`): its long
  reasoning or its tests would be left behind (SFT on a one-line `solution`, code problems dropped as
  `invalid_tests`), so the alarm names the layout to give;
- a source lost whole (after verification): rows came in and none was kept; the alarm names the reasons;
- a source whose kept math rows have no answer at all: SFT trains on their responses, but RL, difficulty
  tagging and evaluation can score none of them (RL's selection.jsonl lists each as `not_rewardable`); the
  alarm names the setting that maps the source's answer field. In a pipeline, some rows without an answer
  (proofs) are no alarm (with `strict` an alarm fails the run); `klear curate`, where a user first sees their
  data, also says how many of a source's math rows lack one (`some=True`: a warning, never a failure).

`klear curate` (flows/cli_curate.py) and `klear pipeline` (flows/pipeline.py) warn with these same lines.
"""
from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from tasks.curation.layouts import layout_hint

def layout_alarms(first_rows: Mapping[str, dict | None], layouts: Mapping[str, str]) -> list[str]:
    """One line per canonical-layout source whose first row holds a field of LAYOUT_HINTS (module rule).
    `first_rows`: source → its first readable row (None: none); `layouts`: source → its layout."""
    out = []
    for name, row in first_rows.items():
        if layouts.get(name, "canonical") != "canonical" or not row:
            continue
        hint = layout_hint(row)
        if hint:
            field, layout, lost = hint
            out.append(f"source {name}: its rows carry `{field}`, which the canonical layout does not read, so "
                       f"{lost} would be left out; give its layout ({layout}: "
                       f"sources.{name}.layout, or klear curate --layout {name}=…)")
    return out


def lost_source_alarms(by_source: Mapping[str, Mapping[str, int]]) -> list[str]:
    """One line per source that brought rows and kept none, with its drop reasons (module rule).
    `by_source`: a dataset version's inputs["by_source"] (rows_in, kept, and a count per reason)."""
    out = []
    for name, c in by_source.items():
        if c.get("rows_in", 0) > 0 and c.get("kept", 0) == 0:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(c.items(), key=lambda x: -x[1])
                                if r not in ("rows_in", "kept") and n)
            out.append(f"source {name}: all {c['rows_in']} rows dropped ({reasons or 'no reason recorded'}); the "
                       f"run trains without them")
    return out


def unanswered_math_alarms(kept: Mapping[str, tuple[int, int]], some: bool = False) -> list[str]:
    """One line per source whose kept math rows all lack an answer, and with `some` per source where some
    of them do (module rule). `kept`: source → (kept math rows, how many of them have an answer)."""
    out = []
    for name, (n, answered) in kept.items():
        if n and not answered:
            out.append(f"source {name}: none of its {n} kept math rows has an answer, so RL, difficulty tagging "
                       f"and evaluation can score none of them (SFT still trains on their responses); map its "
                       f"answer field (sources.{name}.field_map: {{FIELD: answer}}, or klear curate --map "
                       f"{name}.FIELD=answer)")
        elif some and answered < n:
            one = n - answered == 1
            out.append(f"source {name}: {n - answered} of its {n} kept math rows {'has' if one else 'have'} no "
                       f"answer (absent or null), so RL, difficulty tagging and evaluation cannot score "
                       f"{'it' if one else 'them'} (SFT still trains on {'it' if one else 'them'})")
    return out


def math_answers_by_source(problems: pa.Table) -> dict[str, tuple[int, int]]:
    """source → (kept math rows, how many have an answer), from a version's `problems` (columns source,
    domain, answer suffice)."""
    out: dict[str, tuple[int, int]] = {}
    for source, domain, answer in zip(*(problems.column(c).to_pylist() for c in ("source", "domain", "answer"))):
        if domain == "math":
            n, answered = out.get(source, (0, 0))
            out[source] = (n + 1, answered + (answer is not None))
    return out

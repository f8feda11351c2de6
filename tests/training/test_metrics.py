import json

import pytest

from tasks.training.metrics import MetricsLog, read_metrics


def test_resume_drops_later_steps_and_a_torn_last_line(tmp_path):
    rows = [{"step": s, "loss": 1.0 / s} for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 4, "lo')
    MetricsLog(tmp_path, resume_from_step=2).close()
    assert read_metrics(tmp_path) == rows[:2]


def test_a_bad_line_elsewhere_is_an_error_naming_the_line(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(ValueError, match="metrics.jsonl line 2: not JSON"):
        MetricsLog(tmp_path, resume_from_step=2)

"""Curation reports each step's rows as it goes: plain lines on stderr off a terminal, and the same lines
to the run's `feed` (the Prefect wrapper's run log and artifact) with the fraction of the whole run."""
import re

from tasks.curation.config import CurateConfig
from tasks.curation.pipeline import curate
from tasks.progress import ProgressLine
from tests.curation.fixtures import expected, write_corpus


def test_every_step_reports_its_rows_with_the_fraction_of_the_whole_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KLEAR_PROGRESS", "plain")
    files = write_corpus(tmp_path)
    lines: list[ProgressLine] = []
    result = curate(CurateConfig(sources=[{"name": "a", "path": str(files["a"])},
                                          {"name": "b", "path": str(files["b"])}],
                                 benchmarks={"bench": str(files["bench"])}), feed=lines.append)
    assert lines[0].startswith("curate memory limit ") and lines[0].fraction is None  # the run's one memory line
    steps = [re.match(r"curate (\S+(?: [ab])?) rows", l).group(1) for l in lines[1:]]
    assert list(dict.fromkeys(steps)) == ["read a", "read b", "exact-dedup", "near-dedup", "decontaminate", "write"]
    # 6 steps; each source is read in one line (< 256 rows), the others say 0/n when they start
    assert [round(l.fraction * 6, 6) for l in lines[1:]] == [1, 2, 2, 3, 3, 4, 4, 5, 5, 6]
    exp = expected()
    rows_in_a = sum(src == "a" for src, _ in exp)
    assert any(re.match(rf"curate read a rows {rows_in_a}/{rows_in_a} kept \d+ rows/s [\d,]+ done in", l)
               for l in lines), lines
    n = result.problems.num_rows
    assert re.match(rf"curate decontaminate rows {n + result.counts['contaminated']}/\d+ contaminated "
                    rf"{result.counts['contaminated']} ", lines[-3]), lines[-3]
    valid = result.rows_in - result.counts["malformed"]  # the rows read into parts
    assert re.match(rf"curate write rows {valid}/{valid} ", lines[-1]), lines[-1]
    assert capsys.readouterr().err.splitlines() == list(lines)  # the terminal shows the same lines


def test_a_step_left_with_no_rows_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    """Every row of the source malformed: the steps after reading have no rows, and each says `rows 0/0`
    once, with its figure (not once per update: each update of a total of 0 is its last)."""
    monkeypatch.setenv("KLEAR_PROGRESS", "plain")
    src = tmp_path / "wrongcol.jsonl"
    src.write_text("".join(f'{{"questoin": "What is {i} plus {i}?"}}\n' for i in range(5)))
    curate(CurateConfig(sources=[{"name": "wc", "path": str(src)}]))
    lines = [l for l in capsys.readouterr().err.splitlines() if not l.startswith("curate memory limit")]
    assert lines[0].startswith("curate read wc rows 5/5 kept 0 ")
    assert lines[1:] == ["curate exact-dedup rows 0/0 duplicate 0", "curate near-dedup rows 0/0 near_duplicate 0",
                         "curate write rows 0/0"]

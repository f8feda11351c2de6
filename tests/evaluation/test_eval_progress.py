"""Evaluation reports problems done, samples and correct so far while it runs (tasks/evaluation/evaluate.py
sample_and_grade), and the same completions and grades come out however the generator hands them over."""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.evaluation.evaluate import sample_and_grade
from tasks.generation.base import Completion, SamplingParams
from tasks.progress import StepProgress

ROOT = Path(__file__).resolve().parents[2]


def _rows(n):
    return [{"id": str(i), "domain": "math", "problem": f"{i}+1?", "answer": str(i + 1)} for i in range(n)]


def _answer(i, j):
    """Sample j of problem i: right for even j."""
    return f"</think>\\boxed{{{i + 1 if j % 2 == 0 else -1}}}"


class _Canned:
    """Canned completions, all at once (as a generator without batch reports)."""

    def generate(self, prompts, params):
        return [[Completion(_answer(int(p), j), [7] * 3) for j in range(params.n)] for p in prompts]


class _CannedInBatches(_Canned):
    """The same completions, handed to `on_batch` two problems at a time as they are made."""

    def generate(self, prompts, params, on_batch=None):
        out = []
        for start in range(0, len(prompts), 2):
            batch = super().generate(prompts[start:start + 2], params)
            out.extend(batch)
            if on_batch:
                on_batch(start, batch)
        return out


def _run(gen, n, k):
    out = io.StringIO()
    report = StepProgress("eval b", unit="problems", stream=out, mode="plain", interval=0.0)
    samples, grades = sample_and_grade(gen, _rows(n), [str(i) for i in range(n)], SamplingParams(n=k), {}, report)
    return samples, [[g.correct for g in gs] for gs in grades], out.getvalue().splitlines()


def test_problems_are_reported_batch_by_batch_as_the_generator_makes_them():
    samples, correct, lines = _run(_CannedInBatches(), 4, 2)
    assert [l.split(" tok/s")[0] for l in lines] == [
        "eval b problems 0/4", "eval b problems 2/4 samples 4 correct 2", "eval b problems 4/4 samples 8 correct 4"]
    assert lines[-1].endswith(tuple(f"done in {s}s" for s in range(60)))
    assert (samples, correct) == _run(_Canned(), 4, 2)[:2]  # the same texts and grades either way


def test_a_generator_without_batch_reports_is_graded_and_reported_in_chunks():
    samples, correct, lines = _run(_Canned(), 40, 4)  # GRADE_CHUNK 64 samples = 16 problems of 4
    assert [l.split(" samples")[0].split(" tok/s")[0] for l in lines] == [
        "eval b problems 0/40", "eval b problems 0/40 generated 160",  # all generated, none graded yet
        "eval b problems 16/40", "eval b problems 32/40", "eval b problems 40/40"]
    assert lines[-1].startswith("eval b problems 40/40 samples 160 correct 80 ")
    assert correct[3] == [True, False, True, False] and samples[3][0] == _answer(3, 0)


@pytest.mark.slow  # samples a real tiny model in a subprocess (no Prefect)
def test_a_short_eval_writes_progress_lines_to_stderr_before_it_finishes(tmp_path):
    """Off a terminal (stderr piped) a real evaluation writes plain item lines — problems done, samples,
    correct so far — and they arrive before its result."""
    from tasks.models.factory import init_model

    corpus = [f"<think>{a}+{b}={a + b}</think> \\boxed{{{a + b}}}" for a in range(20) for b in range(20)]
    model = init_model(tmp_path / "tiny", corpus, seed=0)
    bench = tmp_path / "b.jsonl"
    bench.write_text("".join(json.dumps({"problem": f"{a}+1?", "answer": str(a + 1)}) + "\n" for a in range(6)))
    code = ("import json; from tasks.evaluation.evaluate import EvalConfig, evaluate; "
            f"r = evaluate({str(model)!r}, 'tiny', {str(bench)!r}, EvalConfig(k=2, max_tokens=8, backend='hf')); "
            "print('RESULT', json.dumps(r.summary()), flush=True)")
    env = {k: v for k, v in os.environ.items() if k not in ("KLEAR_PROGRESS", "KLEAR_PROGRESS_INTERVAL")}
    proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout
    lines = proc.stdout.splitlines()
    result = next(i for i, l in enumerate(lines) if l.startswith("RESULT "))
    progress = [i for i, l in enumerate(lines) if l.startswith("eval tiny problems ")]
    assert progress and progress[-1] < result, proc.stdout
    assert lines[progress[0]] == "eval tiny problems 0/6"
    assert lines[progress[-1]].startswith("eval tiny problems 6/6 samples 12 correct ")
    assert "done in" in lines[progress[-1]]
    assert "\r" not in proc.stdout and "\x1b[" not in proc.stdout  # plain lines, no redraws

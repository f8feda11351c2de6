"""Evaluate a model on a benchmark: k samples per problem (paper: temperature 0.6, top_p 0.95), graded
by domain (graders registry), summarised as avg@k and pass@k (metrics.py). Seeded per problem: problem p
is sampled with problem_seed(seed, p.id) (tasks/generation/sampling.py), so the same model, benchmark and
seed give the same numbers, however the problems are batched or split over processes: `nproc` N runs N
worker processes, each with its own engine on a shard of the problems (tasks/generation/parallel.py), and
gives exactly the one-process numbers and per-problem records (grading runs here, in the caller, as
batches arrive, and the results are merged in benchmark order before the metrics).

Engines: `evaluate` closes an engine it builds (in a finally) and leaves open one it is handed.

A row that cannot be graded (a math row with no answer, a code row with no tests) stops the evaluation
before it generates, like any bad row (`gradable_benchmark_row`: one line naming file and row).

A problem whose prompt does not fit the model's context minus max_tokens stops the evaluation before it
generates (`require_fit`: one line naming the row).

Infra outcomes (sandbox fault, grader hang, ungradable row; tasks/grading/grade.py) are left out of avg@k
and pass@k (metrics.py) and reported: `infra` samples, and `infra_problems` whose samples were all infra
(left out of both averages)."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from storage import paths
from tasks.curation.malformed import Malformed, field_names, listed
from tasks.curation.problems import benchmark_problem
from tasks.evaluation.config import EvalConfig
from tasks.evaluation.metrics import avg_at_k, infra_counts, mean_pass_at_k
from tasks.generation.base import PromptTooLong, SamplingParams, accepts, chat_prompt, fit_prompts, prompt_budget
from tasks.generation.sampling import problem_seeds
from tasks.generation.select import make_generator
from tasks.grading.batch import grade_samples
from tasks.models.checks import context_length
from tasks.progress import Feed, Progress, StepProgress
from tasks.records.reader import read_records


@dataclass
class EvalResult:
    benchmark: str
    benchmark_path: str
    k: int
    seed: int
    avg_at_k: float
    pass_at_k: float
    n_problems: int
    per_problem: list[dict] = field(default_factory=list)
    infra: int = 0            # samples with an infra outcome, left out of avg@k / pass@k
    infra_problems: int = 0   # problems all of whose samples were infra, left out entirely

    def summary(self) -> dict:
        return {k: getattr(self, k) for k in ("benchmark", "benchmark_path", "k", "seed", "avg_at_k",
                                              "pass_at_k", "n_problems", "infra", "infra_problems")}


def gradable_benchmark_row(value) -> dict:
    """A benchmark row as `load_benchmark` keeps it: a canonical row (benchmark_problem; a list answer, a
    missing problem are refused there) that can be graded. A math row needs an answer that is not missing,
    null or empty (blank); a code row needs tests. Malformed otherwise. Graded anyway, such a row would be
    `infra` on every sample (tasks/grading: "no_reference") and left out of avg@k and pass@k, so the
    numbers would be those of another benchmark, with nothing saying which row was left out."""
    row = benchmark_problem(value)
    if row["domain"] == "math" and not (row["answer"] or "").strip():
        raise Malformed(f"answer is missing, null or empty (a math benchmark row is graded against it; "
                        f"{_row_has(value)})")
    if row["domain"] == "code" and row["tests"] is None:
        raise Malformed(f"tests are missing or null (a code benchmark row is graded by them; {_row_has(value)})")
    return row


def _row_has(value) -> str:
    """`row has: a, b`: the fields holding a value, so a row whose answer sits under another name says so."""
    return f"row has: {listed(field_names(value))}"


def load_benchmark(path: str) -> list[dict]:
    """Canonical, gradable rows of a benchmark file (gradable_benchmark_row). A bad row stops the
    read: one line naming the file and row (tasks/records/reader.py), since a held-out set with a row left
    out would give another benchmark's number; so does a file with no rows.

    Read once per process while the file is unchanged: the CLI's checks, the prompt-length check and the
    evaluation of one `klear eval` (and RL's held-out evaluations, run after run) share the one read. A
    local file is known by its device, inode, size and modification time; other paths are read each time."""
    key = _file_key(path)
    with _READ_LOCK:
        rows = _READ.get(key) if key is not None else None
    if rows is None:
        rows = [r.value for r in read_records(path, gradable_benchmark_row)]
        if not rows:
            raise ValueError(f"{path}: benchmark has no rows")
        if key is not None:
            _keep(key, rows)
    return [dict(r) for r in rows]  # the caller's own copies: the kept ones stay as read


KEEP_READ = 8  # benchmark files whose rows stay in memory (held-out sets: small)
_READ: dict[tuple, list[dict]] = {}
_READ_LOCK = threading.Lock()  # Prefect runs tasks in threads of one process


def _keep(key: tuple, rows: list[dict]) -> None:
    with _READ_LOCK:
        if len(_READ) >= KEEP_READ:
            del _READ[next(iter(_READ))]  # the oldest
        _READ[key] = rows


def _file_key(path: str) -> tuple | None:
    """What tells one local file's content from another's without reading it; None for other paths."""
    if path.startswith("hf:") or not paths.is_local(path):
        return None
    try:
        st = os.stat(path.removeprefix("file://"))
    except OSError:
        return None  # the reader says what is wrong with it
    return path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def require_fit(path: str, tok, context_length: int | None, prompts: list[str], max_tokens: int) -> None:
    """The benchmark side of the prompt-length bound (tasks/generation/base.py): every problem's prompt
    fits the model's context minus max_tokens, else PromptTooLong naming the first row that does not (and
    how many do not). A benchmark is not training data: avg@k over the problems that happen to fit would
    not be that benchmark's number, so the evaluation stops before generating instead of leaving rows out."""
    _, too_long = fit_prompts(tok, context_length, prompts, max_tokens)
    if too_long:
        first, more = too_long[0], len(too_long) - 1
        raise PromptTooLong(
            f"{path} row {first.index + 1}: the prompt ({first.size()}) does not fit the model's context "
            f"{context_length:,} minus max_tokens {max_tokens} = {prompt_budget(context_length, max_tokens):,} tokens"
            + (f" ({more} more rows too long)" if more else ""))


def check_benchmark_fits(model_dir: str, path: str, max_tokens: int) -> None:
    """`require_fit` with the model directory's tokenizer and context, before any model is loaded."""
    from transformers import AutoTokenizer  # here, not at import: the CLI checks flags without transformers

    tok = AutoTokenizer.from_pretrained(model_dir)
    require_fit(path, tok, context_length(model_dir), [chat_prompt(tok, r["problem"]) for r in load_benchmark(path)],
                max_tokens)


GRADE_CHUNK = 64  # samples per grading call (and progress line) when the generator reports no batches


def sample_and_grade(gen, rows: list[dict], prompts: list[str], params: SamplingParams, graders: dict,
                     progress: Progress | None = None,
                     seeds: list[int] | None = None) -> tuple[list[list[str]], list[list]]:
    """The texts of `params.n` samples per problem and their grades — exactly gen.generate(prompts,
    params, seeds=seeds)'s completions (`seeds`, one per problem, go to a generator that takes them),
    graded batch by batch as the generator finishes them when its `generate` takes
    `on_batch(start, completions)`, else after it returns, in chunks of about GRADE_CHUNK samples.
    `progress` (tasks/progress.py) counts problems done, samples and correct so far, and
    generated tokens for the rate; it is told `0/n` first, so a run says what it does before it generates
    (and, from a generator that hands everything over at the end, `0/n generated S` when it has)."""
    samples: list[list[str]] = [[] for _ in rows]
    grades: list[list] = [[] for _ in rows]
    tally = {"done": 0, "samples": 0, "correct": 0}

    def take(start: int, completions: list, counted: bool = False) -> None:
        texts = [[c.text for c in cs] for cs in completions]
        graded = grade_samples(rows[start:start + len(texts)], texts, graders)
        samples[start:start + len(texts)], grades[start:start + len(texts)] = texts, graded
        tally["done"] += len(texts)
        tally["samples"] += sum(map(len, texts))
        tally["correct"] += sum(g.correct for gs in graded for g in gs if not g.infra)
        if progress is not None:
            tokens = 0 if counted else sum(len(c.token_ids) for cs in completions for c in cs)
            progress.update(tally["done"], len(rows), tokens=tokens, samples=tally["samples"], correct=tally["correct"])

    if progress is not None:
        progress.update(0, len(rows))
    kw = {"seeds": seeds} if seeds is not None and accepts(gen.generate, "seeds") else {}
    if accepts(gen.generate, "on_batch"):
        gen.generate(prompts, params, on_batch=take, **kw)
    else:
        completions = gen.generate(prompts, params, **kw)
        if progress is not None:  # generation is over: its tokens and rate now, grading's progress next
            progress.update(0, len(rows), tokens=sum(len(c.token_ids) for cs in completions for c in cs),
                            generated=sum(map(len, completions)))
        chunk = max(1, GRADE_CHUNK // max(1, params.n))
        for start in range(0, len(completions), chunk):
            take(start, completions[start:start + chunk], counted=True)
    return samples, grades


def evaluate(model_dir: str, name: str, path: str, cfg: EvalConfig, generator=None, graders=None,
             feed: Feed | None = None, progress_mode: str | None = None,
             nproc: int = 1) -> EvalResult:
    """`generator`: an engine to sample with (left open); without one, an engine of `cfg.backend` over
    `model_dir` is built and closed here, or with `nproc` > 1 one per worker process. `feed` and
    `progress_mode` go to the progress report (tasks/progress.py StepProgress: problems done, samples,
    correct so far); `progress_mode="off"` keeps the terminal quiet (RL's held-out runs)."""
    if generator is not None and nproc != 1:
        raise ValueError(f"evaluate: nproc {nproc} builds its own engines, one per process; a given generator "
                         "runs in this process (nproc 1)")
    rows = load_benchmark(path)
    own_gen = generator is None
    gen = generator or make_generator(model_dir, cfg.backend, nproc=nproc)
    try:
        prompts = [chat_prompt(gen.tok, r["problem"]) for r in rows]
        require_fit(path, gen.tok, getattr(gen, "context_length", None), prompts, cfg.max_tokens)
        params = cfg.sampling_params(cfg.k)
        own = graders is None
        graders = {} if own else graders
        report = StepProgress(f"eval {name}", unit="problems", mode=progress_mode, feed=feed)
        try:
            samples, grades = sample_and_grade(gen, rows, prompts, params, graders, report,
                                               seeds=problem_seeds(cfg.seed, rows))
        finally:
            report.close()
            if own:
                for g in graders.values():
                    g.close()
    finally:
        if own_gen:
            gen.close()
    return summarize(name, path, cfg, rows, samples, grades)


def summarize(name: str, path: str, cfg: EvalConfig, rows: list[dict], samples: list[list[str]],
              grades: list[list]) -> EvalResult:
    """avg@k / pass@k over the graded samples, infra outcomes counted apart. Per problem: `correct` and
    `n` over graded samples, `infra` samples left out, `scores` per sample (None for infra)."""
    correct = [[None if g.infra else g.correct for g in gs] for gs in grades]
    per = [{"id": r["id"], "domain": r["domain"], "correct": sum(x is True for x in c),
            "n": sum(x is not None for x in c), "infra": sum(x is None for x in c),
            "scores": [None if g.infra else g.score for g in gs], "sample": s[0] if s else ""}
           for r, c, gs, s in zip(rows, correct, grades, samples)]
    infra, infra_problems = infra_counts(correct)
    return EvalResult(name, path, cfg.k, cfg.seed, avg_at_k(correct), mean_pass_at_k(correct, cfg.k), len(rows),
                      per, infra, infra_problems)

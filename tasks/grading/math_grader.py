"""Math grading (paper: the text after `</think>` against `\\boxed{answer}`), math-verify in worker processes.

    final_text = the part of the response after the last `</think>` (the whole response if none)
    correct    = math_check.verdict(reference(answer), final_text)   (math_check.py states the rule)

The reference is parsed on its own first (once per worker, and its verdict cached here), so a hang or a
failure is pinned on the side that caused it. Outcomes (grade.py), per (response, row):
- a row without `answer` → INFRA "no_reference" (the row cannot be graded);
- a reference math-verify cannot parse, or whose parse raises or runs past the deadline → INFRA
  "invalid_reference" (a fault of the row, not the model; curation drops such rows as `invalid_answer`);
- verified → CORRECT (score 1.0); not verified → WRONG (0.0), verdict "" (the detail says why when the
  grader knows more than "not equal": a false relation, a fragment, an exception the answer caused);
- reading or comparing the model's answer raises (a number past Python's 4,300-digit int limit, a sympy
  error) → WRONG, the exception in the detail: an answer cannot make its own grade ungraded;
- parsing and verifying the model's answer takes more than `timeout` CPU seconds → WRONG
  "grader_timeout": an answer the grader cannot finish (`3^{3^{3^{3}}}`, `(10^{10})!`) is not a correct
  one, and leaving it ungraded would let a policy dodge the wrong-answer reward;
- the worker dies on the model's answer, and again on a retry in a fresh worker → WRONG "grader_crash"
  (one death may be a kill from outside; two on the same answer are the answer's doing);
- the worker stalls (no progress and no CPU use within the wall backstop: a starved machine) or cannot
  start (its warm-up grades a right and a wrong answer, so a grader broken for every answer does not
  start) → INFRA "grader_stalled" / "grader_unavailable"; our own code raising outside the answer's
  step → INFRA "grader_error".
The deadline is CPU time of the worker (timeouts.py), so it does not depend on the machine's load.
"""
from __future__ import annotations

import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor

from tasks.grading import math_check
from tasks.grading.grade import Grade, Outcome
from tasks.grading.timeouts import ProcessTimeoutPool, RemoteError, TimedOut, WorkerFault

log = logging.getLogger(__name__)

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
NO_REFERENCE = Grade(Outcome.INFRA, 0.0, "no_reference", "no reference answer")
UNPARSABLE = "math-verify finds no mathematical expression in it"
_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")  # references valid without asking math-verify


def final_text(response: str) -> str:
    i = response.rfind(THINK_CLOSE)
    return response[i + len(THINK_CLOSE):] if i >= 0 else response


def _invalid(answer: str, why: str) -> Grade:
    return Grade(Outcome.INFRA, 0.0, "invalid_reference", f"reference {answer[:80]!r}: {why}")


class MathGrader:
    """`grade_batch([(response, row), ...]) -> [Grade, ...]`; `grade(response, answer) -> Grade`.

    A batch goes to the workers `chunk` items per request, and the results stream back one by one, so a
    batch costs a few round trips and an item past its deadline costs only itself."""

    def __init__(self, timeout: float = 5.0, workers: int = 1, chunk: int = 64, memory_mb: int | None = 4096,
                 startup_timeout: float = 120.0, **_):
        self.timeout = timeout  # CPU seconds per answer (and per reference parse): math-verify's own default
        self.workers = max(1, workers)  # worker processes grading chunks of one batch at once
        self.chunk = max(1, chunk)  # items per request: few round trips, little work redone after a kill
        # ~200 MB is what a worker needs; the cap makes an answer that would exhaust memory a MemoryError
        # (a wrong answer) rather than the host's OOM killer taking a trainer process
        self._pool = ProcessTimeoutPool(self.workers, startup_timeout=startup_timeout, memory_mb=memory_mb)
        self._refs: dict[str, str | None] = {}  # reference → None (parsable) or why it is invalid
        self._lock = threading.Lock()

    def grade(self, response: str, answer: str) -> Grade:
        return self.grade_batch([(response, {"answer": answer})])[0]

    def grade_batch(self, items) -> list[Grade]:
        out: list[Grade | None] = [None] * len(items)
        todo = []
        for i, (response, row) in enumerate(items):
            answer = row.get("answer")
            if answer is None:
                out[i] = NO_REFERENCE
            elif self._refs.get(str(answer)) is not None:
                out[i] = _invalid(str(answer), self._refs[str(answer)])
            else:
                todo.append((i, str(answer), final_text(response)))
        chunks = [todo[k:k + self.chunk] for k in range(0, len(todo), self.chunk)]
        if self.workers > 1 and len(chunks) > 1:
            with ThreadPoolExecutor(self.workers) as ex:
                done = list(ex.map(self._grade_chunk, chunks))
        else:
            done = [self._grade_chunk(c) for c in chunks]
        for results in done:
            for i, g in results.items():
                out[i] = g
        return out

    def _note(self, answer: str, why: str | None) -> None:
        with self._lock:
            self._refs[answer] = why

    def _grade_chunk(self, part: list[tuple[int, str, str]]) -> dict[int, Grade]:
        results: dict[int, Grade] = {}
        pending, died = list(part), set()
        while pending:
            got, in_answer = 0, False  # items finished in this request; the next one's reference parsed
            try:
                for kind, k, ok, *why in self._pool.stream(math_check.grade_stream,
                                                           [(a, t) for _, a, t in pending], timeout=self.timeout):
                    i, answer, _ = pending[k]
                    if kind == "reference":
                        self._note(answer, None if ok else UNPARSABLE)
                        in_answer = ok
                        if not ok:
                            results[i], got = _invalid(answer, UNPARSABLE), k + 1
                    else:
                        results[i] = Grade(Outcome.CORRECT, 1.0) if ok else Grade(Outcome.WRONG, 0.0, "", "".join(why))
                        got, in_answer = k + 1, False
                return results
            except TimedOut:
                i, answer, _ = pending[got]
                if in_answer:
                    results[i] = Grade(Outcome.WRONG, 0.0, "grader_timeout",
                                       f"math-verify ran past {self.timeout:g} s of CPU time on the answer")
                else:
                    why = f"parsing it ran past {self.timeout:g} s of CPU time"
                    self._note(answer, why)
                    results[i] = _invalid(answer, why)
            except WorkerFault as e:
                i, answer, _ = pending[got]
                if e.kind == "startup":
                    log.error("math grading unavailable: %s", e)
                    results.update({j: Grade(Outcome.INFRA, 0.0, "grader_unavailable", str(e)) for j, _, _ in pending})
                    return results
                if e.kind == "died" and i not in died:
                    died.add(i)
                    pending = pending[got:]
                    continue
                if e.kind == "stalled":
                    results[i] = Grade(Outcome.INFRA, 0.0, "grader_stalled", str(e))
                elif in_answer:
                    results[i] = Grade(Outcome.WRONG, 0.0, "grader_crash", f"the worker died twice on the answer: {e}")
                else:
                    self._note(answer, "the worker died twice parsing it")
                    results[i] = _invalid(answer, "the worker died twice parsing it")
            except RemoteError as e:
                i, _, _ = pending[got]
                last = str(e).strip().splitlines()[-1]
                log.warning("math grading raised: %s", e)
                if in_answer:  # raised on the model's answer: the answer's doing (math_check catches it first)
                    results[i] = Grade(Outcome.WRONG, 0.0, "", f"grading the answer raised: {last}")
                else:
                    results[i] = Grade(Outcome.INFRA, 0.0, "grader_error", last)
            pending = pending[got + 1:]
        return results

    def check_references(self, answers: list[str]) -> list[str | None]:
        """Per answer, None when math-verify parses it (as grading would) or why it cannot: its
        `invalid_answer` detail at curation. Plain numbers pass without asking math-verify. A worker
        that cannot start or stalls raises WorkerFault (never a silent keep or drop)."""
        out: list[str | None] = [None] * len(answers)
        todo = [(k, a) for k, a in enumerate(answers) if not _PLAIN_NUMBER.fullmatch(a.strip())]
        died: set[int] = set()
        while todo:
            got = 0
            try:
                for _, k, ok in self._pool.stream(math_check.reference_stream, [a for _, a in todo],
                                                  timeout=self.timeout):
                    out[todo[k][0]] = None if ok else UNPARSABLE
                    self._note(todo[k][1], out[todo[k][0]])
                    got = k + 1
                return out
            except TimedOut:
                out[todo[got][0]] = f"parsing it ran past {self.timeout:g} s of CPU time"
            except WorkerFault as e:
                if e.kind != "died":
                    raise
                if todo[got][0] not in died:  # as in grading: one death may be a kill from outside
                    died.add(todo[got][0])
                    todo = todo[got:]
                    continue
                out[todo[got][0]] = "the worker died twice parsing it"
            self._note(todo[got][1], out[todo[got][0]])
            todo = todo[got + 1:]
        return out

    def close(self) -> None:
        self._pool.close()

"""A benchmark is read once per `klear eval` (its checks, the prompt-length check and the evaluation share the
read) and a bad row refuses it in one line naming file and row. No model: a canned generator and tokenizer."""
import json
import sys
import types

import pytest

import tasks.models.checks
import tasks.records.reader as reader
from flows.cli_checks import check_benchmark
from flows.cli_common import UserError
from tasks.evaluation import evaluate as ev
from tasks.evaluation.evaluate import EvalConfig, evaluate, load_benchmark
from tasks.generation.base import Completion


class _Tok:
    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=True):
        return msgs[0]["content"]


class _Canned:
    tok = _Tok()

    def generate(self, prompts, params):
        return [[Completion("\\boxed{2}", [])] * params.n for _ in prompts]


@pytest.fixture
def reads(monkeypatch):
    """The paths the one reader opens, in order."""
    seen, real = [], reader.read_source
    monkeypatch.setattr(reader, "read_source", lambda path: (seen.append(path), real(path))[1])
    return seen


def _bench(tmp_path, lines):
    p = tmp_path / "bench.jsonl"
    p.write_text("".join(line + "\n" for line in lines))
    return str(p)


def test_one_klear_eval_reads_its_benchmark_once(tmp_path, monkeypatch, reads):
    path = _bench(tmp_path, [json.dumps({"problem": f"{a}+1?", "answer": str(a + 1)}) for a in range(3)])
    monkeypatch.setattr(tasks.models.checks, "check_model_dir", lambda model, deep=False: None)
    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(
        AutoTokenizer=types.SimpleNamespace(from_pretrained=lambda model: _Tok())))
    monkeypatch.setattr(ev, "context_length", lambda model: None)
    # what `klear eval --benchmark b=PATH` does in its one process (flows/cli_eval.py), the flow's task included
    load_benchmark(path)
    check_benchmark(f"--benchmark b={path}", path, "model-dir", 8)
    result = evaluate("model-dir", "b", path, EvalConfig(k=1, max_tokens=8), generator=_Canned(), progress_mode="off")
    assert result.n_problems == 3 and result.pass_at_k == pytest.approx(1 / 3)
    assert reads == [path]
    with open(path, "a") as f:  # a changed file is read again
        f.write(json.dumps({"problem": "9+1?", "answer": "10"}) + "\n")
    assert len(load_benchmark(path)) == 4 and reads == [path, path]


@pytest.mark.parametrize("line, why", [('{"answer": "2"}', "missing 'problem'"), ("{oops", "not JSON")])
def test_a_bad_row_refuses_the_benchmark_in_one_line(tmp_path, line, why):
    path = _bench(tmp_path, ['{"problem": "1+1?", "answer": "2"}', "", line])
    with pytest.raises(ValueError, match=rf"^{path} row 3: {why}"):
        load_benchmark(path)
    with pytest.raises(UserError, match=rf"^--benchmark b={path}: row 3: {why}"):
        check_benchmark(f"--benchmark b={path}", path)


@pytest.mark.parametrize("row, has", [({"problem": "3+9?"}, "problem"),
                                      ({"problem": "3+9?", "answer": None}, "problem"),
                                      ({"problem": "3+9?", "answer": ""}, "problem, answer"),
                                      ({"problem": "3+9?", "answer": "  "}, "problem, answer")],
                         ids=["missing", "null", "empty", "blank"])
def test_a_math_row_without_an_answer_refuses_the_benchmark_in_one_line(tmp_path, row, has):
    """Graded, it would be `infra` on every sample and silently left out of avg@k: refused like a list answer."""
    path = _bench(tmp_path, ['{"problem": "1+1?", "answer": "2"}', '{"problem": "2+2?", "answer": 4}', json.dumps(row)])
    why = rf"answer is missing, null or empty \(a math benchmark row is graded against it; row has: {has}\)$"
    with pytest.raises(ValueError, match=rf"^{path} row 3: {why}"):
        load_benchmark(path)
    with pytest.raises(UserError, match=rf"^--benchmark b={path}: row 3: {why}"):
        check_benchmark(f"--benchmark b={path}", path)


def test_a_math_row_whose_answer_sits_under_another_name_says_which_fields_it_has(tmp_path):
    path = _bench(tmp_path, [json.dumps({"problem": "1+1?", "final": "2", "solution": "\\boxed{2}"})])
    with pytest.raises(ValueError, match=rf"^{path} row 1: answer is missing.*; row has: problem, final, solution\)$"):
        load_benchmark(path)


def test_a_code_row_without_tests_refuses_the_benchmark_in_one_line(tmp_path):
    path = _bench(tmp_path, [json.dumps({"problem": "Print the sum of two numbers.", "domain": "code"})])
    with pytest.raises(ValueError, match=rf"^{path} row 1: tests are missing or null"):
        load_benchmark(path)


def test_an_answerless_row_stops_the_evaluation_before_it_generates(tmp_path):
    path = _bench(tmp_path, ['{"problem": "1+1?", "answer": "2"}', '{"problem": "2+2?", "answer": null}'])

    class Counting(_Canned):
        calls = 0

        def generate(self, prompts, params):
            Counting.calls += 1
            return super().generate(prompts, params)

    with pytest.raises(ValueError, match=rf"^{path} row 2: answer is missing"):
        evaluate("model-dir", "b", path, EvalConfig(k=1, max_tokens=8), generator=Counting(), progress_mode="off")
    assert Counting.calls == 0


def test_a_numeric_zero_answer_is_an_answer(tmp_path):
    path = _bench(tmp_path, ['{"problem": "1-1?", "answer": 0}', '{"problem": "2-2?", "answer": "0"}'])
    assert [r["answer"] for r in load_benchmark(path)] == ["0", "0"]

"""A careless user's bad invocations, command by command, as a subprocess: each ends as ONE line on stderr
(`klear: error: ...` naming the flag, file or row), exit code 2, no traceback, before any flow starts.
Bad rows do not end a run: it completes and names the row. One behaviour per test, parametrized over the
commands it applies to. Tests that start Prefect or train are marked slow."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOOD_ROWS = [{"problem": f"What is {a} plus {b}?", "answer": str(a + b),
              "response": f"<think>{a} + {b} = {a + b}</think> \\boxed{{{a + b}}}"} for a in range(4) for b in range(4)]
HUGE = {"problem": "Compute " + "1 + " * 250_000 + "1.", "answer": "250001"}  # 1 MB


def klear(*args, env=None, timeout=300):
    e = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    e.pop("PREFECT_API_URL", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "flows.cli", *map(str, args)], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line(r, *needles):
    """Exit 2, no traceback, stderr exactly one `klear: error:` line holding every needle."""
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("klear: error: "), r.stderr[-3000:]
    for needle in needles:
        assert str(needle) in lines[0], (needle, lines[0])


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _checkpoint(out: Path, model: Path) -> Path:
    """A real checkpoints/step-2 in `out` (sharded state of `model` with its AdamW state, trainer state)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tasks.training.checkpoint import save_checkpoint

    m = AutoModelForCausalLM.from_pretrained(str(model))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    return save_checkpoint(m, AutoTokenizer.from_pretrained(str(model)), opt, sched, 2, out, keep=2)


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    """Files a user might pass: good ones, and each broken one the tests name."""
    from storage.store import Store
    from tasks.curation.config import CurateConfig
    from tasks.curation.dataset import build_curated_version, plan_curation
    from tasks.models.factory import init_model

    w = tmp_path_factory.mktemp("bad")
    f = {"w": w, "good": _jsonl(w / "good.jsonl", GOOD_ROWS), "bench": _jsonl(w / "bench.jsonl", GOOD_ROWS[:3]),
         "huge": _jsonl(w / "huge.jsonl", [GOOD_ROWS[0], HUGE]), "file": w / "a-file"}
    f["file"].write_text("x")
    for d in ("dir.jsonl", "dir.parquet", "plain-dir"):
        (w / d).mkdir()
        f[d] = w / d
    f["model"] = init_model(w / "model", [r["problem"] + r["response"] for r in GOOD_ROWS], seed=0)
    breaks = {
        "truncated weights": ("model.safetensors", lambda p: p.write_bytes(p.read_bytes()[:5000])),
        "garbage weights": ("model.safetensors", lambda p: p.write_bytes(b"\x00garbage" * 100)),
        "no weights": ("", lambda p: (p / "model.safetensors").unlink()),
        "config not JSON": ("config.json", lambda p: p.write_text("{not json")),
        "config without model_type": ("config.json", lambda p: p.write_text('{"hidden_size": 8}')),
        "garbled tokenizer": ("tokenizer.json", lambda p: p.write_text("{garbage")),
    }
    for name, (file, damage) in breaks.items():
        d = shutil.copytree(f["model"], w / name.replace(" ", "-"))
        damage(d / file if file else d)
        f[name] = d / file if file else d
        f[name + " dir"] = d
    store = str(w / "store")
    cfg = CurateConfig(sources=[{"name": "g", "path": str(f["good"])}], store=store)
    Store(store).publish(build_curated_version(cfg, *plan_curation(cfg)).id)
    f["store"] = store
    return f


def _fill(fx, text) -> str:
    """`{name}` → the fixture path of that name (names hold dots, so not str.format)."""
    text = str(text)
    for k, v in fx.items():
        if isinstance(v, (Path, str)):
            text = text.replace("{" + k + "}", str(v))
    return text


def _args(fx, command, **over):
    """A valid invocation of `command`, with some arguments replaced (None drops one)."""
    m, g, w = fx["model"], fx["good"], fx["w"]
    base = {
        "sft": {"--model": m, "--data": g, "--out": w / "runs" / "sft", "--max-steps": 1},
        "rl": {"--model": m, "--data": g, "--out": w / "runs" / "rl", "--steps": 1, "--domains": "math"},
        "ablate": {"--model": m, "--data": g, "--out": w / "runs" / "ab", "--benchmark": fx["bench"], "--steps": 1,
                   "--domains": "math"},
        "eval": {"--model": m, "--benchmark": f"b={fx['bench']}"},
        "tag-difficulty": {"--model": m, "--store": fx["store"]},
        "curate": {"--source": f"g={g}", "--store": w / "cur-store"},
        "model init": {"--out": w / "runs" / "init"},
        "pipeline": {"--store": w / "pipe-store"},
        "demo": {"--store": w / "demo-store"},
    }[command]
    opts = {**base, **over}
    args = command.split()
    for k, v in opts.items():
        if v is True:
            args.append(k)
        elif v is not None:
            args += [k, v]
    return args


# -- paths ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command, over, needle", [
    ("curate", {"--source": "a={dir.jsonl}"}, "--source a={dir.jsonl}: is a directory"),
    ("curate", {"--benchmark": "b={dir.parquet}"}, "--benchmark b={dir.parquet}: is a directory"),
    ("sft", {"--data": "{dir.jsonl}"}, "--data {dir.jsonl}: a directory that is not a store"),
    ("rl", {"--data": "{plain-dir}"}, "--data {plain-dir}: a directory that is not a store"),
    ("ablate", {"--data": "{dir.jsonl}"}, "--data {dir.jsonl}: a directory that is not a store"),
    ("eval", {"--benchmark": "b={dir.jsonl}"}, "--benchmark b={dir.jsonl}: is a directory"),
    ("ablate", {"--benchmark": "{dir.jsonl}"}, "--benchmark {dir.jsonl}: is a directory"),
    ("rl", {"--eval-benchmark": "{dir.jsonl}", "--eval-every": 1},
     "eval_benchmark (--eval-benchmark) {dir.jsonl}: is a directory"),
    ("model init", {"--corpus": "{dir.jsonl}"}, "--corpus {dir.jsonl}: "),
    ("pipeline", {"--config": "{plain-dir}"}, "--config {plain-dir}: is a directory, not a settings file"),
])
def test_a_directory_where_a_file_is_expected(fx, command, over, needle):
    assert_one_line(klear(*_args(fx, command, **{k: _fill(fx, v) for k, v in over.items()})), _fill(fx, needle))


def test_verify_checks_the_scheduler_before_any_work(fx, tmp_path):
    """A port that refuses the connection: one line, and no progress line before it (nothing started)."""
    rows = _jsonl(tmp_path / "sub.jsonl", [{"id": "a", "code": "print(1)",
                                            "tests": {"inputs": [""], "outputs": ["1\n"]}}])
    out = tmp_path / "v.jsonl"
    assert_one_line(klear("verify", rows, "--out", out, "--dask", "tcp://127.0.0.1:1"),
                    "--dask tcp://127.0.0.1:1: cannot reach the scheduler (connection refused by 127.0.0.1:1)")
    assert not out.exists()


def test_model_import_of_a_directory_says_it_is_one(fx, tmp_path):
    out = tmp_path / "m"
    assert_one_line(klear("model", "import", "--gguf", fx["plain-dir"], "--out", out),
                    f"--gguf {fx['plain-dir']}: is a directory, not a GGUF file")
    assert not out.exists()


def test_verify_input_that_is_a_directory(fx):
    assert_one_line(klear("verify", fx["dir.jsonl"], "--out", fx["w"] / "v.jsonl"), f"{fx['dir.jsonl']}: is a directory")


def test_verify_refuses_a_problem_file_that_holds_no_submission(fx, tmp_path):
    """A raw TACO file (question, solutions, input_output: no id, code or tests) is not judged into one
    invalid_tests row with no id per problem: one line names what the rows have and the curate command."""
    taco = tmp_path / "taco.jsonl"
    taco.write_text("".join(json.dumps({"question": f"Print {i}.", "solutions": json.dumps([f"print({i})"]),
                                        "input_output": json.dumps({"inputs": [""], "outputs": [f"{i}\n"]})}) + "\n"
                            for i in range(3)))
    out = tmp_path / "v.jsonl"
    assert_one_line(klear("verify", taco, "--out", out), f"{taco}: no row has a submission's fields",
                    "lacks id, code, tests", "input_output, question, solutions", "klear curate --source")
    assert not out.exists()


@pytest.mark.parametrize("command", ["curate", "tag-difficulty", "eval", "pipeline", "demo"])
@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_store_that_is_a_file(fx, command, where):
    store = fx["file"] if where == "a file" else fx["file"] / "store"
    assert_one_line(klear(*_args(fx, command, **{"--store": store})), f"--store {store}: ")


@pytest.mark.parametrize("value, needle", [("{file}", "store ({config}) {file}: is a file"),
                                           ("5", "store ({config}): must be a store directory or URL (got 5)")])
def test_a_store_from_the_config_file_is_named_by_its_key_not_a_flag(fx, tmp_path, value, needle):
    config = tmp_path / "run.yaml"
    config.write_text(f"store: {_fill(fx, value)}\n")
    r = klear(*_args(fx, "pipeline", **{"--store": None, "--config": config}))
    assert_one_line(r, _fill(fx, needle).replace("{config}", str(config)))
    assert "--store" not in r.stderr


def test_a_store_from_the_environment_that_is_a_file(fx):
    r = klear(*_args(fx, "curate", **{"--store": None}), env={"KLEAR_STORE": str(fx["file"])})
    assert_one_line(r, f"$KLEAR_STORE {fx['file']}: is a file")


@pytest.mark.parametrize("command", ["sft", "curate"])
def test_a_thread_count_from_the_environment_that_is_no_count(fx, command):
    r = klear(*_args(fx, command), env={"KLEAR_TORCH_THREADS": "two"})
    assert_one_line(r, "KLEAR_TORCH_THREADS='two': give a thread count (1, 2, ...) or auto")


def test_curate_verify_code_into_a_store_under_a_file(fx):
    store = fx["file"] / "s"
    assert_one_line(klear(*_args(fx, "curate", **{"--store": store}), "--verify-code"), f"--store {store}: ")


@pytest.mark.parametrize("command", ["curate", "pipeline"])
def test_a_store_that_cannot_be_created(fx, command):
    """Root may write anywhere a directory can be made; /proc takes no new directory from anyone."""
    assert_one_line(klear(*_args(fx, command, **{"--store": "/proc/klear-store"})), "--store /proc/klear-store: ")


def test_a_refused_invocation_creates_no_store(fx):
    store = fx["w"] / "never-made" / "store"
    r = klear(*_args(fx, "curate", **{"--store": store, "--source": f"a={fx['w'] / 'no-such.jsonl'}"}))
    assert_one_line(r, "no such file")
    assert not (fx["w"] / "never-made").exists()


def test_an_empty_benchmark_is_refused_before_any_curation_work(fx):
    empty = fx["w"] / "empty-bench.jsonl"
    empty.write_text("")
    store = fx["w"] / "store-for-empty-bench"
    r = klear(*_args(fx, "curate", **{"--store": store}), "--benchmark", f"b={empty}")
    assert_one_line(r, "--benchmark", "has no rows with a 'problem'")  # one line: no step ran before it
    assert not store.exists()


@pytest.mark.parametrize("command", ["sft", "rl", "ablate", "model init"])
@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_out_that_is_a_file(fx, command, where):
    out = fx["file"] if where == "a file" else fx["file"] / "out"
    assert_one_line(klear(*_args(fx, command, **{"--out": out})), f"--out {out}: ")


@pytest.mark.parametrize("out, why", [("{dir.jsonl}", "is a directory"), ("{file}/o.jsonl", "cannot write there"),
                                      ("{bench}", "is not a klear verify result; pass --force")])
def test_verify_out_that_cannot_be_written_or_is_someone_elses_data(fx, out, why):
    out = _fill(fx, out)
    assert_one_line(klear("verify", fx["good"], "--out", out), f"--out {out}: ", why)


# -- corrupt models and checkpoints ------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["sft", "rl", "eval", "tag-difficulty", "ablate"])
@pytest.mark.parametrize("damage", ["truncated weights", "config not JSON"])
def test_a_corrupt_model_names_the_file(fx, command, damage):
    assert_one_line(klear(*_args(fx, command, **{"--model": fx[damage + " dir"]})), f"--model {fx[damage]}: ")


@pytest.mark.parametrize("damage", ["garbage weights", "no weights", "config without model_type", "garbled tokenizer"])
def test_every_kind_of_broken_model_names_the_file(fx, damage):
    assert_one_line(klear(*_args(fx, "eval", **{"--model": fx[damage + " dir"]})), f"--model {fx[damage]}: ")


@pytest.mark.parametrize("command", ["sft", "rl"])
@pytest.mark.parametrize("file, content", [("state/.metadata", b"garbage"), ("trainer_state.json", b"{broken"),
                                           ("state/__0_0.distcp", None)])
def test_a_corrupt_checkpoint_on_resume_names_it(fx, tmp_path, command, file, content):
    out = tmp_path / "run"
    ckpt = _checkpoint(out, fx["model"])
    f = ckpt / file
    f.write_bytes(content if content is not None else f.read_bytes()[:4000])
    assert_one_line(klear(*_args(fx, command, **{"--out": out, "--resume": True})), f"checkpoint {ckpt}", file)


# -- output directories: one run at a time, nothing overwritten without --force -----------------------------

@pytest.mark.parametrize("command", ["sft", "rl"])
def test_an_out_holding_another_runs_checkpoint_needs_resume_or_force(fx, tmp_path, command):
    _checkpoint(tmp_path / "run", fx["model"])
    assert_one_line(klear(*_args(fx, command, **{"--out": tmp_path / "run"})), "another run's checkpoint",
                    "--resume", "--force")


@pytest.mark.parametrize("command", ["sft", "rl"])
def test_an_out_holding_a_model_needs_force(fx, tmp_path, command):
    """`--out` naming a model (the base model itself, say): training would overwrite its weights at the end."""
    model = shutil.copytree(fx["model"], tmp_path / "m")
    assert_one_line(klear(*_args(fx, command, **{"--out": model})), f"--out {model}: holds a model it would overwrite",
                    "--force")


def test_resume_and_force_together_is_one_line(fx, tmp_path):
    assert_one_line(klear(*_args(fx, "sft", **{"--out": tmp_path, "--resume": True, "--force": True})),
                    "--resume and --force contradict")


def test_model_init_refuses_an_existing_model_without_force(fx, tmp_path):
    trained = shutil.copytree(fx["model"], tmp_path / "trained")
    before = (trained / "model.safetensors").read_bytes()
    assert_one_line(klear("model", "init", "--out", trained), f"--out {trained}: already holds a model", "--force")
    assert (trained / "model.safetensors").read_bytes() == before


@pytest.mark.parametrize("command", ["sft", "rl", "ablate", "model init"])
def test_a_second_run_on_a_claimed_out_is_refused_naming_the_holder(fx, tmp_path, command):
    out = tmp_path / "busy"
    code = (f"import time; from storage.claims import acquire; acquire({str(out)!r}, 'klear sft --out busy'); "
            "print('held', flush=True); time.sleep(120)")
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert_one_line(klear(*_args(fx, command, **{"--out": out})), f"--out {out}: in use by another run",
                        f"pid {holder.pid}", "klear sft --out busy")
    finally:
        holder.kill()
        holder.wait()


# -- prompt length ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("command, over", [
    ("eval", {"--benchmark": "h={huge}"}),
    ("ablate", {"--benchmark": "{huge}"}),
    ("rl", {"--eval-benchmark": "{huge}", "--eval-every": 1}),
])
def test_a_benchmark_prompt_longer_than_the_context_is_one_line(fx, command, over):
    over = {k: _fill(fx, v) for k, v in over.items()}
    assert_one_line(klear(*_args(fx, command, **over)), f"{fx['huge']}", "row 2: the prompt",
                    "does not fit the model's context 1,024")


@pytest.mark.parametrize("command, flag", [("eval", "--benchmark"), ("rl", "--eval-benchmark")])
def test_a_benchmark_math_row_without_an_answer_is_one_line(fx, tmp_path, command, flag):
    """Not graded `infra` and left out of avg@k unnamed: refused before any model loads, naming file and row."""
    bench = _jsonl(tmp_path / "noanswer.jsonl", [GOOD_ROWS[0], {"problem": "What is 3 plus 9?"}, GOOD_ROWS[1]])
    value = f"b={bench}" if command == "eval" else str(bench)
    over = {flag: value, **({"--eval-every": 1} if command == "rl" else {})}
    assert_one_line(klear(*_args(fx, command, **over)), f"{flag} {value}: ", "row 2: answer is missing, null or empty")


@pytest.mark.parametrize("command", ["eval", "rl", "tag-difficulty"])
def test_max_tokens_past_the_context_is_one_line(fx, command):
    assert_one_line(klear(*_args(fx, command, **{"--max-tokens": 4096})), "--max-tokens 4096: must be below",
                    "context of 1024")


# -- bad rows: the run goes on and names the row -------------------------------------------------------------

def test_model_init_skips_a_bad_corpus_row_and_names_it(fx, tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps(GOOD_ROWS[0]) + "\n{oops\n" + json.dumps(GOOD_ROWS[1]) + "\n")
    r = klear("model", "init", "--out", tmp_path / "m", "--corpus", corpus)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"{corpus} row 2: not JSON" in r.stderr


@pytest.mark.slow  # curation runs as a Prefect flow
def test_curate_keeps_going_past_bad_rows_and_records_each_with_its_row(fx, tmp_path, session_api):
    import duckdb

    src = tmp_path / "s.jsonl"
    src.write_text('{"problem": "p ok one two three", "answer": "3"}\n{oops\n"just a string"\n'
                   '{"problem": "p nan", "answer": NaN}\n{"problem": "p inf", "answer": Infinity}\n')
    r = klear("curate", "--source", f"s={src}", "--store", tmp_path / "store", env=session_api)
    assert r.returncode == 0 and "Traceback" not in r.stderr, (r.returncode, r.stderr, r.stdout[-2000:])
    con = duckdb.connect(str(tmp_path / "store" / "catalog.duckdb"), read_only=True)
    dropped = con.sql("select row, reason, detail from dropped order by row").fetchall()
    assert [(row, reason) for row, reason, _ in dropped] == [(2, "malformed"), (3, "malformed"), (4, "malformed"),
                                                             (5, "malformed")]
    assert "finite number" in dropped[2][2] and "finite number" in dropped[3][2]
    assert con.sql("select count(*) from problems").fetchall() == [(1,)]


# -- errors that only a flow can find: one line, not Prefect's traceback and then the line ------------------

@pytest.mark.slow  # runs a flow
@pytest.mark.parametrize("command", ["sft", "rl", "eval"])
def test_an_error_inside_the_flow_is_printed_once(fx, tmp_path, command, session_api):
    """A config with a model_type transformers does not know passes the CLI's light checks; the trainer's
    entry finds it (tasks/models/checks.py, deep) inside the flow; eval, which loads the tokenizer to bound
    prompt lengths, finds it before."""
    model = shutil.copytree(fx["model"], tmp_path / "m")
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**cfg, "model_type": "no-such-architecture"}))
    out = {"--out": tmp_path / "o"} if command in ("sft", "rl") else {}
    r = klear(*_args(fx, command, **{"--model": model, **out}), env=session_api, timeout=600)
    lines = [line for line in r.stderr.splitlines() if line.strip() and not line.startswith(f"klear {command}")]
    assert r.returncode == 2 and "Traceback" not in r.stderr and "ERROR" not in r.stderr, r.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("klear: error: ")
    assert f"{model}/config.json: not a usable model config" in lines[0]


@pytest.mark.slow  # torchrun behind Prefect
def test_a_rank_past_its_step_timeout_ends_klear_rl_in_one_line_after_the_ranks_output(fx, tmp_path, session_api):
    """--step-timeout-s reaches every torchrun rank; the rank that runs out of time says so (rank, step, limit)
    and the launcher adds one line, not Prefect's traceback of it."""
    r = klear(*_args(fx, "rl", **{"--out": tmp_path / "o", "--steps": 2}), "--nproc", 2, "--step-timeout-s", 0.01,
              env=session_api, timeout=600)
    assert r.returncode == 2, r.stderr[-3000:]
    assert re.search(r"rank [01]: RL step 1 ran past 0.01 s \(--step-timeout-s\); ending the run", r.stderr)
    last = [line for line in r.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("klear: error: torchrun RL with 2 processes failed (exit 1)"), r.stderr[-3000:]
    assert "RanksFailed" not in r.stderr and "launch.py" not in r.stderr  # no launcher traceback


@pytest.mark.slow  # trains one step behind Prefect
def test_a_stale_claim_from_a_dead_run_is_taken_over(fx, tmp_path, session_api):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "o"
    out.mkdir()
    (out / ".klear-claim.json").write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename,
                                                       "command": "klear sft (killed)", "since": "earlier"}))
    r = klear(*_args(fx, "sft", **{"--out": out}), "--batch-size", 2, "--seq-len", 64, env=session_api,
              timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not (out / ".klear-claim.json").exists() and (out / "model.safetensors").exists()


# -- URLs, special files and paths nothing can read or hold: one line, before any work, nothing created ------

def _missing_library_protocol() -> str:
    """A protocol fsspec knows whose library is not installed here (s3fs, gcsfs, ...)."""
    import fsspec

    for protocol in ("s3", "gs", "abfs", "oci", "dropbox", "box"):
        try:
            fsspec.get_filesystem_class(protocol)
        except ImportError:
            return protocol
    pytest.skip("every remote file system library is installed here")


@pytest.mark.parametrize("command, flag, value, needle, kind", [
    ("curate", "--source", "a={url}/a.jsonl", "--source a={url}/a.jsonl: ", "unknown protocol"),
    ("curate", "--source", "a={url}/a.jsonl", "--source a={url}/a.jsonl: ", "library not installed"),
    ("curate", "--benchmark", "b={url}/b.jsonl", "--benchmark b={url}/b.jsonl: ", "library not installed"),
    ("curate", "--store", "{url}/store", "--store {url}/store: ", "unknown protocol"),
    ("curate", "--store", "{url}/store", "--store {url}/store: ", "library not installed"),
    ("eval", "--benchmark", "b={url}/b.parquet", "--benchmark b={url}/b.parquet: ", "unknown protocol"),
    ("ablate", "--benchmark", "{url}/b.jsonl", "--benchmark {url}/b.jsonl: ", "library not installed"),
    ("sft", "--data", "{url}/d.jsonl", "--data {url}/d.jsonl: ", "unknown protocol"),
    ("model init", "--corpus", "{url}/c.jsonl", "--corpus {url}/c.jsonl: ", "library not installed"),
])
def test_a_url_nothing_here_can_open_is_one_line(fx, command, flag, value, needle, kind):
    url = "nosuchfs://bucket" if kind == "unknown protocol" else f"{_missing_library_protocol()}://bucket"
    why = "unknown protocol nosuchfs://" if kind == "unknown protocol" else "needs a library that is not installed"
    r = klear(*_args(fx, command, **{flag: value.format(url=url)}))
    assert_one_line(r, needle.format(url=url), why)


def test_a_remote_store_without_its_catalog_setting_is_one_line(fx):
    r = klear(*_args(fx, "curate", **{"--store": "memory://bucket/store"}), env={"KLEAR_CATALOG": ""})
    assert_one_line(r, "--store memory://bucket/store: ", "set KLEAR_CATALOG")


@pytest.mark.parametrize("name", ["odd?store", "odd[1]store", "odd*store"])
def test_a_store_path_duckdb_would_read_as_a_pattern_is_one_line_and_nothing_is_made(fx, name):
    store = fx["w"] / name
    r = klear(*_args(fx, "curate", **{"--store": store}))
    assert_one_line(r, f"--store {store}: a store path must not contain")
    assert not store.exists()


@pytest.mark.parametrize("command, flag, value", [
    ("curate", "--source", "f={fifo}"),
    ("curate", "--benchmark", "f={fifo}"),
    ("eval", "--benchmark", "f={fifo}"),
    ("sft", "--data", "{fifo}"),
    ("model init", "--corpus", "{fifo}"),
])
def test_a_named_pipe_as_input_is_one_line_and_never_blocks(fx, tmp_path, command, flag, value):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    r = klear(*_args(fx, command, **{flag: value.format(fifo=fifo)}), timeout=120)
    assert_one_line(r, f"{fifo}: is a named pipe (FIFO), not a regular file")


@pytest.mark.parametrize("where", ["a file", "cannot be created"])
def test_a_work_dir_that_cannot_be_used_is_one_line(fx, where):
    work = fx["file"] if where == "a file" else "/proc/klear-work"  # /proc takes no new directory, even from root
    store = fx["w"] / "store-for-work-dir"
    assert_one_line(klear(*_args(fx, "curate", **{"--store": store}), "--work-dir", work), f"--work-dir {work}: ")
    assert not store.exists()


@pytest.mark.parametrize("command, which", [
    ("curate", "catalog.duckdb"), ("curate", ".catalog.record/record.duckdb"),
    ("sft", "catalog.duckdb"), ("tag-difficulty", ".catalog.record/record.duckdb"),
])
def test_a_catalog_that_is_not_duckdb_is_one_line_naming_it(fx, tmp_path, command, which):
    store = tmp_path / "s"
    shutil.copytree(fx["store"], store)
    if which == "catalog.duckdb":
        shutil.rmtree(store / ".catalog.record")  # no record: catalog.duckdb is what the store would read
    (store / which).write_bytes(b"not a DuckDB database\n")
    over = {"--data": store, "--out": tmp_path / "o"} if command == "sft" else {"--store": store}
    assert_one_line(klear(*_args(fx, command, **over)), f"{store / which}: not a DuckDB database file")


@pytest.mark.parametrize("command", ["curate", "sft"])
def test_an_unreachable_prefect_api_is_one_line_before_anything_is_made(fx, tmp_path, command):
    url = "http://127.0.0.1:9/api"  # the discard port: nothing listens there
    out = tmp_path / "made"
    over = {"--store": out} if command == "curate" else {"--out": out}
    r = klear(*_args(fx, command, **over), env={"PREFECT_API_URL": url})
    assert_one_line(r, f"PREFECT_API_URL {url}: cannot reach it")
    assert not out.exists()


@pytest.mark.parametrize("command", ["eval", "rl"])
def test_backend_vllm_without_vllm_is_one_line(fx, tmp_path, command):
    hidden = tmp_path / "no-vllm" / "vllm"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('No module named vllm')\n")
    r = klear(*_args(fx, command), "--backend", "vllm", env={"PYTHONPATH": str(hidden.parent)})
    assert_one_line(r, "--backend vllm: vLLM cannot be imported")


@pytest.mark.parametrize("flag, value, needle", [
    ("--seed", "-1", "--seed must be at least 0 (got -1)"),
    ("--scale", "nan", "--scale must be a finite number (got nan)"),
    ("--scale", "1e9", "--scale must be at most"),
    ("--scale", "0.001", "--scale must be at least 0.02 (got 0.001)"),
    ("--seed", str(1 << 64), "--seed must be at most"),
])
def test_a_bad_pipeline_value_is_one_line_naming_its_flag(fx, flag, value, needle):
    store = fx["w"] / "pipe-store-bad-value"
    assert_one_line(klear(*_args(fx, "pipeline", **{"--store": store, flag: value})), needle)
    assert not store.exists()


@pytest.mark.parametrize("command", ["sft", "rl", "eval", "model init"])
@pytest.mark.parametrize("seed, needle", [("-1", "seed (--seed) must be at least 0 (got -1)"),
                                          (str(10 ** 20), f"seed (--seed) must be at most {(1 << 63) - 1} (got")])
def test_a_seed_out_of_range_is_the_same_one_line_everywhere_before_anything_is_made(fx, tmp_path, command, seed,
                                                                                     needle):
    out = tmp_path / "out"
    over = {} if command == "eval" else {"--out": out}
    assert_one_line(klear(*_args(fx, command, **over, **{"--seed": seed})), needle)
    assert not out.exists()


@pytest.mark.parametrize("extra, needle", [
    (("--min-tests", "-1"), "--min-tests must be at least 0 (got -1)"),
    (("--map", "g.problem=question"), "g.problem=question: 'question' is not a canonical field (one of: problem,"),
    (("--map", "g.sol=answer", "--map", "g.sol=response"), "--map 'g.sol=response': g.sol is already mapped to 'answer'"),
    (("--map", "g.sol=answer", "--map", "g.cot=answer"), "g.sol=answer and g.cot=answer: two fields mapped onto 'answer'"),
])
def test_a_curate_flag_refused_before_any_work(fx, extra, needle):
    store = fx["w"] / "store-for-refused-flag"
    r = klear(*_args(fx, "curate", **{"--store": store}), *extra)
    assert_one_line(r, needle)
    assert not store.exists()


def test_model_init_refuses_a_corpus_without_responses(fx, tmp_path):
    corpus = _jsonl(tmp_path / "no-responses.jsonl", [{"problem": "What is 1 plus 1?", "answer": "2"}])
    out = tmp_path / "m"
    r = klear("model", "init", "--out", out, "--corpus", corpus)
    assert_one_line(r, f"--corpus {corpus}: no row with a response")
    assert not out.exists()

"""The `klear` CLI as a user runs it: a subprocess, one-line errors with exit 2, a summary table."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.curation.fixtures import write_corpus

KLEAR = [sys.executable, "-m", "flows.cli"]
ROOT = Path(__file__).resolve().parents[2]


def run(args, tmp_path, **env):
    e = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    e.pop("PREFECT_API_URL", None)
    e.update(env)
    return subprocess.run(KLEAR + args, capture_output=True, text=True, cwd=ROOT, env=e, timeout=300)


@pytest.mark.parametrize("args, msg", [
    (["curate", "--source", "nonsense"], "--source 'nonsense': expected NAME=VALUE"),
    (["curate", "--source", "a=/no/such.jsonl"], "--source a=/no/such.jsonl: no such file"),
    (["curate", "--source", "a=data.csv"], "unknown source format"),
    (["curate", "--source", "a=x.jsonl", "--source", "a=y.jsonl"], "'a' given twice"),
    (["curate", "--source", "a=x.jsonl", "--source", " a =y.jsonl"], "--source ' a =y.jsonl': 'a' given twice"),
    (["curate", "--source", "a=x.jsonl", "--benchmark", "m=x.jsonl", "--benchmark", " m=y.jsonl"],
     "--benchmark ' m=y.jsonl': 'm' given twice"),
    (["curate", "--bogus"], "No such option"),
])
def test_bad_invocations_are_one_line_exit_2(args, msg, tmp_path):
    r = run(args, tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and msg in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_layout_for_unknown_source_is_rejected(tmp_path):
    files = write_corpus(tmp_path / "in")
    r = run(["curate", "--source", f"a={files['a']}", "--layout", "zz=apps"], tmp_path)
    assert r.returncode == 2 and "no --source defines" in r.stderr


def test_broken_parquet_is_named(tmp_path):
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"PAR1 not really")
    r = run(["curate", "--source", f"x={bad}"], tmp_path)
    assert r.returncode == 2 and f"x={bad}: not a readable Parquet file" in r.stderr


@pytest.mark.slow
def test_curate_prints_summary_and_reruns_identically(tmp_path, session_api):
    files = write_corpus(tmp_path / "in")
    args = ["curate", "--source", f"a={files['a']}", "--source", f"b={files['b']}",
            "--benchmark", f"bench={files['bench']}", "--store", str(tmp_path / "store")]
    r1 = run(args, tmp_path, **session_api)
    assert r1.returncode == 0, r1.stderr
    assert "TOTAL" in r1.stdout and "catalog.duckdb" in r1.stdout
    r2 = run(args, tmp_path, **session_api)
    assert r2.returncode == 0, r2.stderr
    assert r1.stdout == r2.stdout


@pytest.mark.parametrize("extra, msg", [
    (["--domains", "math,poetry"],
     "domains (--domains) must be a non-empty list of distinct names from code, math (got ('math', 'poetry'))"),
    (["--loss", "ppo2"], "loss (--loss) must be one of cispo, gppo, grpo (got 'ppo2')"),
    (["--rollouts-per-prompt", "1"], "rollouts_per_prompt (--rollouts-per-prompt) must be at least 2 (got 1)"),
    (["--temperature", "nan"], "temperature (--temperature) must be a finite number (got nan)"),
])
def test_rl_flag_errors_are_one_line(extra, msg, tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "d.jsonl"
    data.write_text('{"problem": "1+1?", "answer": "2"}\n')
    r = run(["rl", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"), *extra], tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == f"klear: error: {msg}", r.stderr


def test_sft_unknown_strategy_is_one_line(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "d.jsonl"
    data.write_text('{"problem": "1+1?", "response": "2"}\n')
    r = run(["sft", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"), "--nproc", "2",
             "--strategy", "zero3"], tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == "klear: error: strategy (--strategy) must be one of ddp, fsdp (got 'zero3')", r.stderr


@pytest.mark.parametrize("command, suffix, why", [
    ("sft", "#ds-0000", "store {store} has no dataset version 'ds-0000'"),
    ("rl", "#", "an empty dataset version (expected STORE or STORE#VERSION)"),
])
def test_a_bad_store_reference_is_one_line(tmp_path, command, suffix, why):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (tmp_path / "store").mkdir()
    data = f"{tmp_path}/store{suffix}"
    r = run([command, "--model", str(model), "--data", data, "--out", str(tmp_path / "o")], tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"klear: error: --data {data}: " + why.format(store=f"{tmp_path}/store")


@pytest.mark.slow  # a tiny model and a few SFT steps in a subprocess
def test_sft_writes_progress_lines_while_it_runs(tmp_path, session_api):
    """Off a terminal (stdout and stderr piped, as in CI or a log file) `klear sft` writes plain progress
    lines as it trains — no bar redraws — and the first one arrives while the process still runs."""
    import json
    import queue
    import re
    import threading

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"problem": f"What is {a} plus {b}?",
                                        "response": f"<think>{a} + {b} = {a + b}</think> \\boxed{{{a + b}}}"}) + "\n"
                            for a in range(8) for b in range(8)))
    r = run(["model", "init", "--out", str(tmp_path / "m"), "--corpus", str(data)], tmp_path)
    assert r.returncode == 0, r.stderr
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    for k in ("KLEAR_PROGRESS", "KLEAR_PROGRESS_INTERVAL"):
        env.pop(k, None)
    env.update(session_api)
    proc = subprocess.Popen(KLEAR + ["sft", "--model", str(tmp_path / "m"), "--data", str(data),
                                     "--out", str(tmp_path / "o"), "--epochs", "1", "--max-steps", "6",
                                     "--batch-size", "2", "--micro-batch-size", "2", "--seq-len", "128"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
    lines: queue.Queue = queue.Queue()

    def read() -> None:  # each line with whether the process was still running when it arrived
        for line in proc.stdout:
            lines.put((line, proc.poll() is None))
        lines.put((None, False))

    threading.Thread(target=read, daemon=True).start()
    seen, first_progress = [], None
    try:
        while True:
            line, running = lines.get(timeout=300)  # bounded: a hung run fails here, never the suite
            if line is None:
                break
            seen.append(line)
            if first_progress is None and re.match(r"sft step \d+/6 loss \S+", line):
                first_progress = (len(seen), running)
        assert proc.wait(timeout=60) == 0, "".join(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(seen)
    assert first_progress is not None, out
    assert first_progress[1], f"the first progress line came only after the process ended:\n{out}"
    done = next(i for i, l in enumerate(seen, 1) if l.startswith("checkpoint "))
    assert first_progress[0] < done
    assert re.search(r"^sft step 6/6 loss \S+ tok/s [\d,]+ done in \S+$", out, re.M), out
    assert "\r" not in out and "\x1b[" not in out  # plain lines, no redraws
    assert "anonymous usage data" not in out


@pytest.mark.parametrize("klear_env, notice", [(False, True), (True, False)])
def test_no_prefect_telemetry_notice_on_a_terminal(klear_env, notice, tmp_path):
    """Prefect prints a first-run telemetry notice when imported on a terminal (the control case); with
    the CLI's environment (set in main() before anything imports Prefect) it prints none."""
    import pty

    try:
        from prefect._internal.analytics.ci_detection import CI_ENV_VARS
    except ImportError:  # pragma: no cover - a Prefect without SDK telemetry
        CI_ENV_VARS = frozenset({"CI"})
    env = {k: v for k, v in os.environ.items()
           if k not in CI_ENV_VARS and k not in ("DO_NOT_TRACK", "PREFECT_SERVER_ANALYTICS_ENABLED")}
    env["PREFECT_HOME"] = str(tmp_path / "ph")  # a first run: the notice has not been shown here yet
    code = ("from flows.cli_common import early_defaults; early_defaults(); " if klear_env else "") + \
        "import prefect; print('imported')"
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env)
    os.close(slave)
    out = b""
    try:
        while chunk := os.read(master, 4096):
            out += chunk
    except OSError:  # EIO: the child closed the terminal
        pass
    finally:
        os.close(master)
    assert proc.wait(timeout=120) == 0, out
    assert b"imported" in out
    assert (b"anonymous usage data" in out) == notice, out


def test_a_bad_data_row_is_one_line_before_any_flow_and_a_bad_corpus_row_is_skipped(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "p1", "response": "r"}\n{"problem": "\\ud800"}\n')
    klear = [sys.executable, "-m", "flows.cli"]
    model = tmp_path / "m"
    init = subprocess.run(klear + ["model", "init", "--out", str(model), "--corpus", str(bad)],
                          capture_output=True, text=True, timeout=300)
    assert init.returncode == 0 and "skipped" in init.stderr and "row 2" in init.stderr, init.stderr
    sft = subprocess.run(klear + ["sft", "--model", str(model), "--data", str(bad), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=300)
    assert sft.returncode == 2 and "Traceback" not in sft.stderr, sft.stderr
    assert sft.stderr.strip().splitlines()[-1].startswith("klear: error: --data") and "row 2" in sft.stderr


def config_only_model_and_one_row(tmp_path):
    """A model directory with an empty config.json and a one-row data file: enough for flag checks."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "d.jsonl"
    data.write_text('{"problem": "1+1?", "answer": "2"}\n')
    return model, data


def test_eval_benchmark_named_twice_with_a_space_is_one_line(tmp_path):
    model, data = config_only_model_and_one_row(tmp_path)
    r = run(["eval", "--model", str(model), "--benchmark", f"m={data}", "--benchmark", f" m={data}"], tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == f"klear: error: --benchmark ' m={data}': 'm' given twice", r.stderr


@pytest.mark.parametrize("vary, msg", [
    ("sft_alpha=x", "sft_alpha (--sft-alpha) expects float, got 'x'"),
    ("temprature=1", "temprature (--temprature) is not a setting of RLConfig"),
    ("reward.code_mode=soft,partial", "reward.code_mode (--reward-code-mode) must be one of hard, soft (got 'partial')"),
    ("steps", "--vary 'steps': expected FIELD=VALUE1,VALUE2"),
    ("loss=gppo,gppo", "--vary 'loss=gppo,gppo': gppo given twice"),
    ("lr=0.1,0.2,1e-1", "--vary lr: 1e-1 is the same value as 0.1"),
])
def test_ablate_bad_vary_is_one_line(vary, msg, tmp_path):
    model, data = config_only_model_and_one_row(tmp_path)
    r = run(["ablate", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"),
             "--benchmark", str(data), "--vary", vary], tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == f"klear: error: {msg}", r.stderr


@pytest.mark.parametrize("flags, msg", [
    (["--losses", "gppo,grpo,gppo"], "--losses 'gppo,grpo,gppo': gppo given twice"),
    (["--seeds", "1,1"], "--seeds '1,1': seed 1 given twice"),
    (["--seeds", "2, 1,3,2"], "--seeds '2, 1,3,2': seed 2 given twice"),
])
def test_ablate_a_repeated_loss_or_seed_is_one_line(flags, msg, tmp_path):
    """A repeated seed or arm would train the same run twice and count it twice in the mean and interval."""
    model, data = config_only_model_and_one_row(tmp_path)
    r = run(["ablate", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"),
             "--benchmark", str(data), *flags], tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == f"klear: error: {msg}", r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("arms, msg", [
    (["loss=gppo,mini_batches=x"], "mini_batches (--mini-batches) expects int, got 'x'"),
    (["loss=gppo", "loss"], "--arm 'loss': expected FIELD=VALUE[,FIELD=VALUE…]"),
    (["loss=gppo,loss=grpo"], "--arm 'loss=gppo,loss=grpo': loss given twice"),
    (["loss=ppo"], "loss (--loss) must be one of cispo, gppo, grpo (got 'ppo')"),
    (["loss=gppo", "loss=gppo"], "--arm 'loss=gppo': given twice"),
    (["loss=gppo,lr=0.1", "lr=1e-1, loss=gppo"],
     "--arm 'lr=1e-1, loss=gppo': the same arm as --arm 'loss=gppo,lr=0.1'"),
])
def test_ablate_bad_arm_is_one_line(arms, msg, tmp_path):
    model, data = config_only_model_and_one_row(tmp_path)
    flags = [x for a in arms for x in ("--arm", a)]
    r = run(["ablate", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"),
             "--benchmark", str(data), *flags], tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == f"klear: error: {msg}", r.stderr
    assert not (tmp_path / "o").exists()


def test_the_same_sft_twice_is_done_once_and_other_settings_say_what_changed(tmp_path, session_api):
    """A finished run in --out with the same model, data (version) and settings: nothing to do, exit 0, the
    weights untouched; other settings: one line saying what differs (not "another run's checkpoint")."""
    import json

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"problem": f"What is {a} plus {b}?",
                                        "response": f"<think>{a} + {b} = {a + b}</think> \\boxed{{{a + b}}}"}) + "\n"
                            for a in range(6) for b in range(6)))
    assert run(["model", "init", "--out", str(tmp_path / "m"), "--corpus", str(data)], tmp_path).returncode == 0
    args = ["sft", "--model", str(tmp_path / "m"), "--data", str(data), "--out", str(tmp_path / "o"), "--epochs", "1",
            "--max-steps", "2", "--batch-size", "2", "--seq-len", "128"]
    first = run(args, tmp_path, **session_api)
    assert first.returncode == 0, first.stderr[-2000:]
    weights = tmp_path / "o" / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    again = run(args, tmp_path, **session_api)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "already holds this sft run, finished at step 2" in again.stdout and "nothing to do" in again.stdout
    assert weights.stat().st_mtime_ns == stamp
    other = run(args[:-2] + ["--seq-len", "96"], tmp_path, **session_api)
    lines = [l for l in other.stderr.splitlines() if l.strip()]
    assert other.returncode == 2 and len(lines) == 1, other.stderr[-2000:]
    assert "holds a finished sft run of other settings (seq_len 128 → 96)" in lines[0] and "--force" in lines[0]


@pytest.mark.parametrize("name, content, args, msg", [
    ("empty.jsonl", "", [], "--source e={path}: has no rows (nothing to curate)"),
    ("noans.jsonl", '{"problem": "What is 1 plus 1?", "final": "2"}\n', ["--map", "e.finall=answer"],
     "--map e.finall=answer: no row of source 'e' has field 'finall' (its rows have: problem, final)"),
])
def test_an_empty_source_or_a_map_no_row_has_is_one_line_before_any_work(tmp_path, name, content, args, msg):
    path = tmp_path / name
    path.write_text(content)
    r = run(["curate", "--source", f"e={path}", *args, "--store", str(tmp_path / "store")], tmp_path)
    assert r.returncode == 2 and r.stderr.splitlines() == [f"klear: error: {msg.format(path=path)}"], r.stderr
    assert not (tmp_path / "store").exists()


def test_a_map_names_a_nested_field_by_its_path_and_a_source_whose_name_has_dots(tmp_path):
    from flows.cli_curate import build_curate_config

    path = tmp_path / "n.jsonl"
    path.write_text('{"data": {"question": "q?"}}\n')
    config = build_curate_config({"my.src": str(path), "n": str(path)}, {}, {},
                                 ["my.src.data.question=problem", "n.data.question=problem"], {})
    assert [s.field_map for s in config.sources] == [{"data.question": "problem"}, {"data.question": "problem"}]


def test_curate_warns_of_a_lost_source_and_of_math_rows_without_answers(tmp_path):
    """The lines `klear curate` prints as `klear: warning:` after its table (data_alarms, as the pipeline's)."""
    from dataclasses import asdict

    from flows.cli_curate import curation_alarms
    from tasks.curation.config import CurateConfig
    from tasks.curation.dataset import build_curated_version, plan_curation

    files = {"wc": '{"questoin": "What is 1 plus 3?", "answer": "4"}\n',
             "noans": '{"problem": "What is 1 plus 1?", "final": "2"}\n',
             "some": '{"problem": "What is 2 plus 2?", "answer": "4"}\n{"problem": "What is 3 plus 3?"}\n'}
    for name, text in files.items():
        (tmp_path / f"{name}.jsonl").write_text(text)
    config = CurateConfig(sources=[{"name": n, "path": str(tmp_path / f"{n}.jsonl")} for n in files],
                          store=str(tmp_path / "store"))
    version = asdict(build_curated_version(config, *plan_curation(config)))
    alarms = curation_alarms(version, config.store)
    assert len(alarms) == 3, alarms
    assert alarms[0] == "source wc: all 1 rows dropped (malformed 1); the run trains without them"
    assert alarms[1].startswith("source noans: none of its 1 kept math rows has an answer") and "--map noans.FIELD=answer" in alarms[1]
    assert alarms[2].startswith("source some: 1 of its 2 kept math rows has no answer")

"""Two "nodes" on one machine: `klear sft` and `klear rl` started twice at once with --nnodes 2, --node-rank 0
and 1, --rdzv-endpoint 127.0.0.1:PORT and --nproc 1 (torchrun's static rendezvous, gloo ranks) train the very
weights of one node with --nproc 2; only node 0's launcher reports the run."""
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tasks.models.factory import init_model
from tasks.training.config import RLConfig
from tasks.training.launch import run_rl, run_sft
from tasks.training.sft import SFTConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[2]
ROWS = [{"problem": f"What is {a} plus {b}?", "answer": str(a + b),
         "response": f"<think>\n{a} + {b} = {a + b}\n</think>\nThe answer is \\boxed{{{a + b}}}."}
        for a in range(4) for b in range(4)]
SFT = SFTConfig(max_steps=2, batch_size=4, micro_batch_size=2, seq_len=64, save_every=1000, seed=0)
RL = RLConfig(steps=1, prompts_per_step=2, rollouts_per_prompt=4, mini_batches=2, max_tokens=16, save_every=1000,
              seed=3)
SFT_FLAGS = ["--max-steps", "2", "--batch-size", "4", "--micro-batch-size", "2", "--seq-len", "64",
             "--save-every", "1000", "--seed", "0"]
RL_FLAGS = ["--steps", "1", "--prompts-per-step", "2", "--rollouts-per-prompt", "4", "--mini-batches", "2",
            "--max-tokens", "16", "--save-every", "1000", "--seed", "3"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("nodes")
    data = d / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return str(init_model(d / "base", [r["problem"] + r["response"] for r in ROWS], seed=0)), str(data)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_nodes(args: list[str], env: dict) -> list[str]:
    """Both launchers at once; each one's stdout, after both exited 0 (a stall kills both process groups)."""
    endpoint = f"127.0.0.1:{_free_port()}"
    e = {**os.environ, "OMP_NUM_THREADS": "1", **env}  # as torchrun sets for --nproc 2: two ranks on 2 cores
    procs = [subprocess.Popen([sys.executable, "-m", "flows.cli", *args, "--nproc", "1", "--nnodes", "2",
                               "--node-rank", str(rank), "--rdzv-endpoint", endpoint],
                              cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for rank in (0, 1)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, f"node {procs.index(p)}: {err[-3000:]}"
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return outs


def _same_weights(a: Path, b: Path) -> float:
    """The largest difference between two HF checkpoints' weights (they must hold the same tensors)."""
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert wa.keys() == wb.keys()
    return max((wa[k].float() - wb[k].float()).abs().max().item() for k in wa)


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_sft_on_two_nodes_trains_the_weights_of_one_node_of_two(tiny, session_api, tmp_path):
    model, data = tiny
    one = run_sft(model, data, str(tmp_path / "one"), SFT, nproc=2)
    node0, node1 = _two_nodes(["sft", "--model", model, "--data", data, "--out", str(tmp_path / "two"),
                               *SFT_FLAGS], session_api)
    assert "checkpoint ck-" in node0 and "node 1 of 2: its ranks finished" in node1 and "ck-" not in node1
    assert json.loads((tmp_path / "two" / "sft_config.json").read_text())["world_size"] == 2
    assert [r["loss"] for r in _metrics(tmp_path / "two")] == pytest.approx(one.losses, rel=1e-6)
    assert _same_weights(tmp_path / "one", tmp_path / "two") == 0.0  # the same sums in the same order: bit for bit
    assert _same_weights(Path(model), tmp_path / "two") > 1e-3  # it trained


def test_rl_on_two_nodes_trains_the_weights_of_one_node_of_two(tiny, session_api, tmp_path):
    model, data = tiny
    one = run_rl(model, data, str(tmp_path / "one"), RL, nproc=2)
    assert one["metrics"][-1]["trained_rollouts"] > 0  # the groups' rewards differ: a real update
    node0, node1 = _two_nodes(["rl", "--model", model, "--data", data, "--out", str(tmp_path / "two"),
                               *RL_FLAGS], session_api)
    assert "final reward" in node0 and "node 1 of 2: its ranks finished" in node1
    assert json.loads((tmp_path / "two" / "rl_config.json").read_text())["world_size"] == 2
    keys = ("reward_mean", "loss", "grad_norm")
    assert [r[k] for r in _metrics(tmp_path / "two") for k in keys] == \
        pytest.approx([r[k] for r in one["metrics"] for k in keys], rel=1e-5)
    assert _same_weights(tmp_path / "one", tmp_path / "two") == 0.0
    assert _same_weights(Path(model), tmp_path / "two") > 0.0  # it trained


def test_ablate_on_two_nodes_runs_each_arm_on_its_own_rendezvous_and_matches_one_node(tiny, session_api, tmp_path):
    """Two arms one after another, each its own rendezvous (PORT, PORT + 1): node 1 joins them in node 0's
    order, and every arm trains the weights it trains on one node of two processes."""
    model, data = tiny
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps({k: r[k] for k in ("problem", "answer")}) + "\n" for r in ROWS[:2]))
    flags = ["ablate", "--model", model, "--data", data, "--benchmark", str(bench), "--losses", "gppo,grpo",
             "--seeds", "3", "--eval-k", "1", *RL_FLAGS[:-2]]
    one = subprocess.run([sys.executable, "-m", "flows.cli", *flags, "--out", str(tmp_path / "one"), "--nproc", "2"],
                         cwd=ROOT, env={**os.environ, **session_api}, capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    node0, node1 = _two_nodes([*flags, "--out", str(tmp_path / "two")], session_api)
    assert "loss=gppo" in node0 and "loss=grpo" in node0
    assert "node 1 of 2: its ranks finished; node 0 reports the ablation" in node1 and "loss=gppo" not in node1
    runs = sorted(p.name for p in (tmp_path / "one").glob("rl-*"))
    assert len(runs) == 2 and runs == sorted(p.name for p in (tmp_path / "two").glob("rl-*"))
    for run in runs:
        assert json.loads((tmp_path / "two" / run / "rl_config.json").read_text())["world_size"] == 2
        assert _same_weights(tmp_path / "one" / run, tmp_path / "two" / run) == 0.0, run
        assert _same_weights(Path(model), tmp_path / "two" / run) > 0.0, run  # it trained
    tables = [json.loads(next((tmp_path / d).glob("ab-*.json")).read_text())["table"] for d in ("one", "two")]
    assert tables[0] == tables[1]

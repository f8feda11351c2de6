"""`klear sft` / `klear rl` / `klear ablate` refuse a bad node layout in one line naming the flag, exit 2, before any work."""
import pytest

from tests.flows.test_cli import config_only_model_and_one_row, run


@pytest.fixture
def inputs(tmp_path):
    """A --model directory the flags' check accepts and a one-row --data file: the layout is refused first."""
    return config_only_model_and_one_row(tmp_path)


@pytest.mark.parametrize("command, extra, env, msg", [
    ("sft", ["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:29400"], {},
     "--node-rank 2: must be from 0 to 1 (--nnodes 2)"),
    ("rl", ["--nnodes", "2"], {}, "--nnodes 2: several nodes need --rdzv-endpoint HOST:PORT (node 0's address, "
     "the same on every node), or MASTER_ADDR and MASTER_PORT set"),
    ("rl", [], {"NNODES": "2", "MASTER_ADDR": "head", "MASTER_PORT": "70000"},
     "MASTER_ADDR:MASTER_PORT head:70000: port '70000': expected a number from 1 to 65535"),
])
def test_a_bad_node_layout_is_one_line_exit_2(command, extra, env, msg, inputs, tmp_path):
    model, data = inputs
    r = run([command, "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"), *extra], tmp_path,
            **env)
    assert r.returncode == 2 and r.stderr.strip() == f"klear: error: {msg}", r.stderr
    assert not (tmp_path / "o").exists()


def test_klear_ablate_refuses_rendezvous_ports_past_the_last_one_in_one_line(inputs, tmp_path):
    """Each run of an ablation has its own rendezvous port, PORT + i: 3 arms × 2 seeds from 65535 do not fit."""
    model, data = inputs
    r = run(["ablate", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"), "--benchmark",
             str(data), "--seeds", "1,2", "--nnodes", "2", "--rdzv-endpoint", "h:65535"], tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == (
        "klear: error: --rdzv-endpoint h:65535: 6 runs take ports 65535 to 65540 (one rendezvous each): the last "
        "is above 65535; choose a lower port"), r.stderr
    assert not (tmp_path / "o").exists()

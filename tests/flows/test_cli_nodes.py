"""`klear sft` / `klear rl` refuse a bad node layout in one line naming the flag, exit 2, before any work."""
import pytest

from tests.flows.test_cli import run


@pytest.mark.parametrize("command, extra, env, msg", [
    ("sft", ["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:29400"], {},
     "--node-rank 2: must be from 0 to 1 (--nnodes 2)"),
    ("rl", ["--nnodes", "2"], {}, "--nnodes 2: several nodes need --rdzv-endpoint HOST:PORT (node 0's address, "
     "the same on every node), or MASTER_ADDR and MASTER_PORT set"),
    ("rl", [], {"NNODES": "2", "MASTER_ADDR": "head", "MASTER_PORT": "70000"},
     "MASTER_ADDR:MASTER_PORT head:70000: port '70000': expected a number from 1 to 65535"),
])
def test_a_bad_node_layout_is_one_line_exit_2(command, extra, env, msg, tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "d.jsonl"
    data.write_text('{"problem": "1+1?", "answer": "2", "response": "2"}\n')
    r = run([command, "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"), *extra], tmp_path,
            **env)
    assert r.returncode == 2 and r.stderr.strip() == f"klear: error: {msg}", r.stderr
    assert not (tmp_path / "o").exists()

"""The node layout (tasks/training/nodes.py): one-line errors naming the flag or variable, the scheduler's
variables read only where a flag is missing, and the torchrun command each node runs."""
import pytest

from tasks.training.config import RLConfig
from tasks.training.launch import rl_layout_problem, torchrun_command
from tasks.training.nodes import NodeLayout, node_layout
from tasks.training.sft import SFTConfig


@pytest.mark.parametrize("kw, env, msg", [
    ({"nnodes": 0}, {}, "--nnodes 0: must be at least 1"),
    ({"nnodes": 2}, {}, "--nnodes 2: several nodes need --rdzv-endpoint HOST:PORT"),
    ({"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "h:1"}, {}, "--node-rank 2: must be from 0 to 1 (--nnodes 2)"),
    ({"nnodes": 2, "node_rank": -1, "rdzv_endpoint": "h:1"}, {}, "--node-rank -1: must be from 0 to 1"),
    ({"nnodes": 2, "rdzv_endpoint": "h:0"}, {}, "--rdzv-endpoint h:0: port '0': expected a number from 1 to 65535"),
    ({"nnodes": 2, "rdzv_endpoint": "h:65536"}, {}, "port '65536'"),
    ({"nnodes": 2, "rdzv_endpoint": "h:http"}, {}, "port 'http'"),
    ({"nnodes": 2, "rdzv_endpoint": "head"}, {}, "--rdzv-endpoint head: expected HOST:PORT"),
    ({"nnodes": 2, "rdzv_endpoint": ":29400"}, {}, "expected HOST:PORT"),
    ({"nnodes": 2, "rdzv_endpoint": "fd00::1:29400"}, {}, "IPv6 host in brackets"),
    ({"nnodes": 2, "rdzv_endpoint": "a b:29400"}, {}, "'a b' is not a host name or address"),
    ({"node_rank": 1}, {}, "--node-rank 1: only with --nnodes above 1"),
    ({"rdzv_endpoint": "h:1"}, {}, "--rdzv-endpoint h:1: only with --nnodes above 1"),
    ({}, {"NNODES": "two"}, "NNODES='two' (environment): expected an integer"),
    ({}, {"NNODES": "2", "NODE_RANK": "3", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "NODE_RANK 3: must be from 0 to 1 (NNODES 2)"),
    ({}, {"NNODES": "2", "MASTER_PORT": "29400"}, "MASTER_ADDR and MASTER_PORT are read together"),
    ({}, {"NNODES": "2", "MASTER_ADDR": "h", "MASTER_PORT": "0"}, "MASTER_ADDR:MASTER_PORT h:0: port '0'"),
    ({"nnodes": 2}, {"NNODES": "1"}, "--nnodes 2: several nodes need --rdzv-endpoint"),
])
def test_a_bad_layout_is_one_line_naming_its_flag_or_variable(kw, env, msg):
    with pytest.raises(ValueError) as e:
        node_layout(environ=env, **kw)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_flags_win_over_the_scheduler_variables_which_fill_only_what_is_missing():
    env = {"NNODES": "4", "NODE_RANK": "3", "MASTER_ADDR": "head", "MASTER_PORT": "29500"}
    assert node_layout(environ=env) == NodeLayout(4, 3, "head:29500")
    assert node_layout(node_rank=1, environ=env) == NodeLayout(4, 1, "head:29500")
    assert node_layout(nnodes=2, node_rank=0, rdzv_endpoint="n0:7", environ=env) == NodeLayout(2, 0, "n0:7")
    assert node_layout(environ={"NNODES": "2", "MASTER_ADDR": "fd00::1", "MASTER_PORT": "5"}).rdzv_endpoint == "[fd00::1]:5"
    # one node: a scheduler's MASTER_* / NODE_RANK=0 (set for single-node jobs too) change nothing
    assert node_layout(environ={"NODE_RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "1"}) == NodeLayout()
    assert node_layout(environ={}) == NodeLayout()
    assert node_layout(nnodes=2, rdzv_endpoint="[fd00::1]:29400", environ={}).node_rank == 0


def test_one_node_keeps_the_standalone_command_and_several_use_the_static_rendezvous():
    one = torchrun_command(2, "m", "d", "o", SFTConfig(), False)
    assert one[3:5] == ["--standalone", "--nproc_per_node=2"] and one[5:8] == ["-m", "tasks.training.sft_main", "m"]
    node = node_layout(nnodes=2, node_rank=1, rdzv_endpoint="head:29400", environ={})
    two = torchrun_command(1, "m", "d", "o", RLConfig(), True, "tasks.training.rl_main", node)
    assert two[3:8] == ["--nnodes=2", "--node_rank=1", "--rdzv_backend=static", "--rdzv_endpoint=head:29400",
                        "--nproc_per_node=1"]
    assert "--standalone" not in two and two[8:10] == ["-m", "tasks.training.rl_main"] and two[-1] == "--resume"
    assert node.world(1) == 2 and not node.is_main and node_layout(environ={}).is_main


def test_a_tensor_parallel_engine_stays_on_one_node_and_every_engine_gets_a_group():
    nodes = NodeLayout(2, 0, "h:1")
    assert "--tensor-parallel 2: must divide --nproc 1" in rl_layout_problem(1, RLConfig(tensor_parallel=2), nodes)
    assert "fewer than the 4 vLLM engines" in rl_layout_problem(
        4, RLConfig(tensor_parallel=2, prompts_per_step=3), nodes)
    assert rl_layout_problem(4, RLConfig(tensor_parallel=2, prompts_per_step=4), nodes) is None


def test_consecutive_runs_each_take_their_own_rendezvous_port():
    node = node_layout(nnodes=2, node_rank=1, rdzv_endpoint="[fd00::1]:29400", environ={})
    assert node.for_run(0) == node and node.for_run(3) == NodeLayout(2, 1, "[fd00::1]:29403")
    assert NodeLayout().for_run(5) == NodeLayout() and NodeLayout().runs_problem(10**6) is None
    assert node.runs_problem(36136) is None  # 29400 … 65535
    assert "ports 29400 to 65536" in node.runs_problem(36137) and "\n" not in node.runs_problem(36137)


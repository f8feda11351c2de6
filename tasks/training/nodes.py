"""How one training run spans machines: the node layout a launcher hands to torchrun.

    layout = node_layout(nnodes=2, node_rank=1, rdzv_endpoint="head:29400")   # ValueError naming the flag
    layout.torchrun_args(nproc=8)    # --nnodes=2 --node_rank=1 --rdzv_backend=static --rdzv_endpoint=head:29400 …
    layout.for_run(3)                # an ablation's fourth run: its own rendezvous, head:29403

Rules:
- One node (the default): `torchrun --standalone`, exactly as before; --node-rank and --rdzv-endpoint
  are refused with it (they would be silently ignored).
- Several nodes: every node runs the same command but for --node-rank, with the same --nproc (processes
  per node). The static rendezvous is used, not c10d: torchrun's c10d backend ignores --node_rank and
  numbers the nodes in the order they join, while static makes node R's processes the global ranks
  R·nproc … R·nproc + nproc − 1. So node 0 holds global rank 0 — the one rank that writes metrics, the
  run's config and the final model into `out` — and node 0 hosts the rendezvous: HOST:PORT must be an
  address of node 0 that the other nodes can reach, PORT free there. A node waits for the others up to
  torchrun's static rendezvous timeout (600 s), then fails.
- Data is split by global rank and world size (ranks read `dist.get_rank()`, `dist.get_world_size()`);
  only the device is chosen by LOCAL_RANK (tasks/training/distributed.py).
- A flag left out falls back to the variable a cluster scheduler or its wrapper sets, each one named
  in errors: NNODES for --nnodes, NODE_RANK for --node-rank, MASTER_ADDR and MASTER_PORT (both) for
  --rdzv-endpoint (Kubeflow's PyTorchJob sets MASTER_ADDR/MASTER_PORT and the others are usually exported
  by the job's wrapper script, e.g. NODE_RANK=$SLURM_NODEID). Nothing else is read: WORLD_SIZE and RANK
  mean processes, not nodes, in torchrun's own vocabulary, and are left alone.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

# where each setting comes from when it is not given: the scheduler's variable
ENV_NNODES, ENV_NODE_RANK, ENV_ADDR, ENV_PORT = "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"


@dataclass(frozen=True)
class NodeLayout:
    """This launcher's place in a run over `nnodes` machines. Build it with `node_layout` (it validates)."""

    nnodes: int = 1                   # one machine: torchrun --standalone, no rendezvous to name
    node_rank: int = 0                # node 0 hosts the rendezvous and holds global rank 0 (writes `out`)
    rdzv_endpoint: str | None = None  # HOST:PORT of node 0's rendezvous; required with nnodes > 1

    @property
    def multi(self) -> bool:
        return self.nnodes > 1

    @property
    def is_main(self) -> bool:
        """The node whose launcher reports progress and reads the result (global rank 0 runs on it)."""
        return self.node_rank == 0

    def world(self, nproc: int) -> int:
        """Processes in the whole run: `nproc` on each node."""
        return self.nnodes * nproc

    def torchrun_args(self, nproc: int) -> list[str]:
        """torchrun's launch options for `nproc` processes on this node."""
        if not self.multi:
            return ["--standalone", f"--nproc_per_node={nproc}"]
        return [f"--nnodes={self.nnodes}", f"--node_rank={self.node_rank}", "--rdzv_backend=static",
                f"--rdzv_endpoint={self.rdzv_endpoint}", f"--nproc_per_node={nproc}"]

    def describe(self) -> str:
        return f"node {self.node_rank} of {self.nnodes}" if self.multi else "one node"

    def for_run(self, index: int) -> "NodeLayout":
        """The layout of the `index`-th of several runs launched one after another (an ablation's arms):
        the rendezvous port plus `index`. Each run has its own port, so a node that starts run i+1 while
        node 0's launcher is still closing run i's rendezvous cannot join the wrong one; ports PORT …
        PORT + runs − 1 must be free on node 0 (`runs_problem`)."""
        if not self.multi:
            return self
        host, port = self._host_port()
        return NodeLayout(self.nnodes, self.node_rank, f"{host}:{port + index}")

    def runs_problem(self, runs: int) -> str | None:
        """Why `runs` consecutive runs (`for_run`) do not fit above the endpoint's port, or None."""
        if not self.multi:
            return None
        port = self._host_port()[1]
        if port + runs - 1 > 65535:
            return (f"{runs} runs take ports {port} to {port + runs - 1} (one rendezvous each): the last is "
                    "above 65535; choose a lower port")
        return None

    def _host_port(self) -> tuple[str, int]:
        host, _, port = self.rdzv_endpoint.rpartition(":")  # checked by node_layout: HOST:PORT
        return host, int(port)


def node_layout(nnodes: int | None = None, node_rank: int | None = None, rdzv_endpoint: str | None = None,
                environ: Mapping[str, str] | None = None) -> NodeLayout:
    """The layout from the flags, a missing flag taken from `environ` (NNODES, NODE_RANK,
    MASTER_ADDR:MASTER_PORT; pass {} to read none). ValueError with one line naming the flag or variable."""
    env = os.environ if environ is None else environ
    n_name, r_name, e_name = "--nnodes", "--node-rank", "--rdzv-endpoint"
    if nnodes is None and env.get(ENV_NNODES):
        nnodes, n_name = _env_int(env, ENV_NNODES), ENV_NNODES
    if node_rank is None and env.get(ENV_NODE_RANK):
        node_rank, r_name = _env_int(env, ENV_NODE_RANK), ENV_NODE_RANK
    from_env = rdzv_endpoint is None and (nnodes or 1) > 1
    if from_env and (env.get(ENV_ADDR) or env.get(ENV_PORT)):
        if not (env.get(ENV_ADDR) and env.get(ENV_PORT)):
            raise ValueError(f"{ENV_ADDR} and {ENV_PORT} are read together as the rendezvous endpoint: only "
                             f"{ENV_ADDR if env.get(ENV_ADDR) else ENV_PORT} is set")
        rdzv_endpoint, e_name = f"{_bracketed(env[ENV_ADDR])}:{env[ENV_PORT]}", f"{ENV_ADDR}:{ENV_PORT}"
    nnodes = 1 if nnodes is None else nnodes
    if nnodes < 1:
        raise ValueError(f"{n_name} {nnodes}: must be at least 1")
    if nnodes == 1:
        if node_rank not in (None, 0) and r_name != ENV_NODE_RANK:
            raise ValueError(f"{r_name} {node_rank}: only with {n_name} above 1 (one node is node 0)")
        if rdzv_endpoint is not None:
            raise ValueError(f"{e_name} {rdzv_endpoint}: only with {n_name} above 1 (one node needs no "
                             "rendezvous)")
        return NodeLayout()
    node_rank = 0 if node_rank is None else node_rank
    if not 0 <= node_rank < nnodes:
        raise ValueError(f"{r_name} {node_rank}: must be from 0 to {nnodes - 1} ({n_name} {nnodes})")
    if rdzv_endpoint is None:
        raise ValueError(f"{n_name} {nnodes}: several nodes need {e_name} HOST:PORT (node 0's address, the "
                         f"same on every node), or {ENV_ADDR} and {ENV_PORT} set")
    if why := endpoint_problem(rdzv_endpoint):
        raise ValueError(f"{e_name} {rdzv_endpoint}: {why}")
    return NodeLayout(nnodes, node_rank, rdzv_endpoint)


def endpoint_problem(endpoint: str) -> str | None:
    """Why `endpoint` is not HOST:PORT (an IPv6 host in brackets, PORT 1..65535), or None."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host:
        return "expected HOST:PORT (e.g. node0.example:29400)"
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not bare or "[" in bare or "]" in bare or (":" in bare and bare == host):
        return "expected HOST:PORT with an IPv6 host in brackets (e.g. [fd00::1]:29400)"
    if any(c.isspace() or c in "/@?#" for c in bare):
        return f"{host!r} is not a host name or address"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"port {port!r}: expected a number from 1 to 65535"
    return None


def _env_int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise ValueError(f"{name}={env[name]!r} (environment): expected an integer") from None


def _bracketed(host: str) -> str:
    """An IPv6 MASTER_ADDR in brackets, so HOST:PORT stays unambiguous."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host

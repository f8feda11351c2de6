"""`klear sft`, `klear rl` and `klear ablate` over several machines: the --nnodes/--node-rank/--rdzv-endpoint
options, their check, and what a launcher that is not node 0 does with --out.

The layout's rules (static rendezvous, node 0 holds global rank 0, the scheduler variables read when a
flag is left out) are tasks/training/nodes.py's; what each node's launcher does with --out is
cli_checks.prepare_out's. Node 0's launcher reports progress and records the checkpoint; every node's ranks
read --out (the checkpoint on --resume), so it must be storage all nodes share, at the same path, as
--model and --data.
"""
from __future__ import annotations

from typing import Optional

import typer

from flows.cli_common import UserError, console

NNodesOpt = typer.Option(None, "--nnodes", help="Machines the run spans, --nproc processes on each (default: "
                         "$NNODES, else 1)")
NodeRankOpt = typer.Option(None, "--node-rank", help="This machine's place, 0 to --nnodes - 1; node 0 hosts the "
                           "rendezvous and writes --out (default: $NODE_RANK, else 0)")
RdzvEndpointOpt = typer.Option(None, "--rdzv-endpoint", help="HOST:PORT of node 0's rendezvous, the same on every "
                               "node; required with --nnodes above 1 (default: $MASTER_ADDR:$MASTER_PORT)")


def check_nodes(nnodes: Optional[int], node_rank: Optional[int], rdzv_endpoint: Optional[str]):
    """The NodeLayout of the flags and the scheduler's variables, or one UserError line naming the flag."""
    from tasks.training.nodes import node_layout

    try:
        return node_layout(nnodes, node_rank, rdzv_endpoint)
    except ValueError as e:
        raise UserError(str(e)) from None



def other_node_done(nodes, out: str, what: str = "the run and records its checkpoint") -> None:
    """The one line a launcher other than node 0's ends with: node 0's reports the run (`what`)."""
    console.print(f"{nodes.describe()}: its ranks finished; node 0 reports {what} ({out})")

"""rollout_exchange: every rank gets the step's rollout metadata and the tokens of the rollouts it trains,
and the update is the one the object gather of every rollout gave."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tasks.training.config import RLConfig
from tasks.training.rl_update import Rollout, rank_micro_batches, trained_minibatches
from tasks.training.rollout_exchange import Hollow, NotOnThisRank, exchange_rollouts, rank_needs
from tasks.training.distributed import DistContext
from tests.training.rl_ranks import CFG, fixed_rollouts

ROOT = Path(__file__).resolve().parents[2]


def test_a_hollow_list_has_a_length_and_no_content():
    h = Hollow(3)
    assert len(h) == 3 and h and not Hollow(0)
    with pytest.raises(NotOnThisRank):
        h[0]
    with pytest.raises(NotOnThisRank):
        list(h)


def test_one_process_gets_its_own_rollouts_in_group_order():
    rs = fixed_rollouts(50)
    mine = rs[8:] + rs[:8]
    out = exchange_rollouts(mine, CFG, 0, DistContext(0, 1, torch.device("cpu")))
    assert [r.group for r in out] == sorted(r.group for r in rs) and all(a is b for a, b in zip(out, rs))


@pytest.mark.parametrize("world", [2, 3])
def test_each_rank_needs_exactly_what_its_plan_trains_plus_its_fillers(world):
    """rank_needs against the update's schedule read directly: the ranks' needs cover every trained rollout
    once, and a rank needs another rollout only as the filler of a mini-batch where it has fewer
    micro-batches."""
    rs = fixed_rollouts(50, groups=7, per_group=3)
    cfg = RLConfig(mini_batches=2, micro_batch_size=2, backend="hf")
    need = rank_needs(rs, cfg, 4, world)
    _, minis = trained_minibatches(rs, cfg, 4)
    index = {id(r): i for i, r in enumerate(rs)}
    trained = [{index[id(mb[i][0])] for mb in minis for b in rank_micro_batches(mb, world, cfg)[k] for i in b}
               for k in range(world)]
    assert sorted(i for t in trained for i in t) == sorted(index[id(r)] for mb in minis for r, _ in mb)
    for k in range(world):
        assert trained[k] <= need[k] and len(need[k] - trained[k]) <= len(minis)
    assert sum(map(len, trained)) < len(rs)  # the flat group is trained by no rank


@pytest.mark.slow
def test_two_ranks_exchange_gives_the_object_gather_update_exactly(tmp_path):
    """2 gloo ranks under FSDP, each holding its own groups (uneven lengths, engine log-probs, an INFRA
    rollout, a code group, a truncated rollout, a flat group): the update from exchanged rollouts equals the
    update from every rollout gathered to every rank, bit for bit (parameters and every metric), while each
    rank received only some rollouts' tokens and left others hollow."""
    from tasks.models.factory import init_model

    model = init_model(tmp_path / "base", [f"What is {a} plus {b}? It is {a + b}." for a in range(6)
                                           for b in range(6)], seed=0)
    out = tmp_path / "run"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        str(ROOT / "tests/training/exchange_ranks.py"), str(model), str(out), "fsdp"],
                       cwd=ROOT, timeout=300, capture_output=True, text=True)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-5000:]}"
    params = torch.load(out / "params.pt")
    values = json.loads((out / "values.json").read_text())
    assert values["old"]["trained_rollouts"] == 27 and values["old"]["infra_failures"] == 1
    assert "logprob_diff_mean" in values["old"]
    assert sum(rank["fillers_from_other_rank"] for rank in values["ranks"]) == 2  # the data does test fillers
    assert values["new"] == values["old"]
    assert params["new"].keys() == params["old"].keys()
    assert all(torch.equal(params["new"][k], params["old"][k]) for k in params["old"])
    for rank in values["ranks"]:
        assert rank["same_metadata"] and rank["same_tokens"], rank
        assert rank["received"] > 0 and rank["hollow"] > 0, rank  # some moved, some never did
        assert rank["hollow"] + rank["received"] + rank["held"] == 32
    print(f"2-rank exchange run: {time.monotonic() - t0:.1f} s")

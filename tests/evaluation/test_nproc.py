"""`nproc` N (tasks/generation/parallel.py): worker processes on shards of the problems give exactly the
one-process numbers, records and samples — on the demo benchmark (80 math problems) with a tiny model on
CPU. A worker's exception reaches the caller. Slow: every worker is a fresh interpreter that loads torch."""
import json

import pytest

from tasks.curation.demo_data import write_demo_sources
from tasks.evaluation.evaluate import EvalConfig, evaluate
from tasks.generation.base import SamplingParams, chat_prompt
from tasks.models.factory import init_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo benchmark and a tiny model whose tokenizer was trained on its problems."""
    root = tmp_path_factory.mktemp("nproc")
    files = write_demo_sources(root / "data", seed=0, scale=0.05)
    rows = [json.loads(line) for line in files.bench_math.read_text().splitlines()]
    model = init_model(root / "tiny", [r["problem"] + f" \\boxed{{{r['answer']}}}" for r in rows], seed=0)
    return str(model), str(files.bench_math), rows


def test_eval_in_two_processes_equals_one(demo):
    model, bench, rows = demo
    cfg = EvalConfig(k=4, max_tokens=24, seed=3, backend="hf")  # 16 problems per batch: 5 batches, shards 48 + 32
    one = evaluate(model, "bench_math", bench, cfg, progress_mode="off")
    two = evaluate(model, "bench_math", bench, cfg, progress_mode="off", nproc=2)
    assert one.n_problems == len(rows) == 80
    assert two.summary() == one.summary()
    assert two.per_problem == one.per_problem  # ids, counts, scores and the first sample, in benchmark order
    assert len({p["sample"] for p in one.per_problem}) > 40  # real, varied samples (not one repeated text)


def test_difficulty_tags_in_two_processes_equal_one(demo, tmp_path):
    """Two stores curated from the same rows: the tagged versions have one id (nproc is not a parameter of
    the result) and the same rows."""
    from storage.store import Store
    from tasks.curation.config import CurateConfig
    from tasks.curation.dataset import build_curated_version, plan_curation
    from tasks.evaluation.difficulty import DifficultyConfig, build_difficulty_version

    model, bench, _ = demo
    cfg = DifficultyConfig(k=2, max_tokens=16, seed=1, backend="hf")  # 32 problems per batch: shards 64 + 16
    tagged = []
    for nproc in (1, 2):
        root = str(tmp_path / f"store{nproc}")
        ccfg = CurateConfig(sources=[{"name": "bench", "path": bench}], store=root)
        Store(root).publish(build_curated_version(ccfg, *plan_curation(ccfg)).id)
        v = build_difficulty_version(root, model, cfg, nproc=nproc)
        tagged.append((v.id, Store(root).read_table(v.id, "problems").to_pylist()))
    assert tagged[0] == tagged[1] and len(tagged[0][1]) == 80


def test_sharded_generator_returns_every_sample_of_one_engine(demo):
    """All k samples of every problem, in order, whatever the number of workers; on_batch sees them all."""
    from tasks.generation.hf_backend import HFGenerator
    from tasks.generation.parallel import ShardedGenerator
    from tasks.generation.sampling import problem_seeds

    model, _, rows = demo
    rows = [{**r, "id": f"p{i}"} for i, r in enumerate(rows[:40])]
    one = HFGenerator.from_pretrained(model, device="cpu", batch_size=16)  # 4 prompts per batch at n = 4
    prompts = [chat_prompt(one.tok, r["problem"]) for r in rows]
    sp, seeds = SamplingParams(n=4, temperature=0.6, top_p=0.95, max_tokens=16, seed=0), problem_seeds(1, rows)
    ref = [[c.text for c in cs] for cs in one.generate(prompts, sp, seeds=seeds)]
    one.close()
    seen = {}
    three = ShardedGenerator(model, "hf", 3, batch_size=16)
    out = three.generate(prompts, sp, seeds=seeds, on_batch=lambda start, cs: seen.update(
        {start + i: [c.text for c in c_] for i, c_ in enumerate(cs)}))
    assert [[c.text for c in cs] for cs in out] == ref
    assert [seen[i] for i in range(len(prompts))] == ref


def test_a_worker_exception_reaches_the_caller(demo):
    from tasks.generation.parallel import ShardedGenerator

    model, _, _ = demo
    gen = ShardedGenerator(model, "hf", 2, loop="bogus")
    with pytest.raises(ValueError, match="loop must be auto, lean or hf"):
        gen.generate(["a", "b"], SamplingParams(n=1, max_tokens=2), seeds=[1, 2])

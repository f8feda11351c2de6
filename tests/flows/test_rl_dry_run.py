"""`klear rl --dry-run` (the memory plan, no weights loaded) and `--preset`: the paper preset fits on its
8 × 80 GiB, an explicit flag overrides the preset, a plan that cannot fit exits 1 with its reason, and bad
flags are one line (subprocesses, as a user runs them)."""
import json

from tests.flows.test_bad_input import assert_one_line, klear


def test_paper_preset_prints_a_plan_that_fits():
    r = klear("rl", "--dry-run", "--preset", "paper", "--model", "qwen3-8b")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("qwen3-8b (vllm rollouts): 8.19B parameters on 8 × 80 GiB GPUs, fsdp")
    assert any(l.split()[:2] == ["AdamW", "moments"] for l in lines) and "KV cache" in r.stdout
    assert lines[-1] == "fits"


def test_an_explicit_flag_overrides_the_preset_and_a_plan_that_cannot_fit_exits_1():
    r = klear("rl", "--dry-run", "--preset", "paper", "--model", "qwen3-8b", "--strategy", "ddp")
    assert r.returncode == 1, r.stderr[-2000:]
    assert r.stdout.splitlines()[-1].startswith("refused: needs 143.5 GiB per GPU, more than 80 GiB (largest: "
                                                "AdamW moments")


def test_a_local_model_is_planned_from_its_config_and_the_datas_longest_prompt(tmp_path):
    from tasks.models.factory import init_model

    model = init_model(tmp_path / "m", ["What is two plus two? It is four."] * 4, seed=0)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"problem": "What is 2 plus 2?", "answer": "4"}) + "\n")
    r = klear("rl", "--dry-run", "--model", model, "--data", data, "--backend", "hf", "--max-tokens", "64",
              "--gpu-memory", "24")
    assert r.returncode == 0, r.stderr[-2000:]
    first = r.stdout.splitlines()[0]
    assert first.startswith(f"{model} (hf rollouts)") and "1 × 24 GiB" in first and "response 64)" in first


def test_bad_model_preset_and_missing_data_are_one_line_each():
    assert_one_line(klear("rl", "--dry-run", "--model", "qwen9-1t"), "--dry-run", "qwen9-1t", "qwen3-8b")
    assert_one_line(klear("rl", "--dry-run", "--preset", "huge", "--model", "qwen3-8b"), "--preset", "paper")
    assert_one_line(klear("rl", "--model", "qwen3-8b"), "--data is required")
    assert_one_line(klear("rl", "--dry-run", "--model", "qwen3-8b", "--nproc", "0"), "--nproc")


def test_tensor_parallel_splits_the_engine_and_must_divide_nproc():
    one = klear("rl", "--dry-run", "--preset", "paper", "--model", "qwen3-8b")
    two = klear("rl", "--dry-run", "--preset", "paper", "--model", "qwen3-8b", "--tensor-parallel", "2")
    assert one.returncode == 0 and two.returncode == 0, two.stderr[-2000:]
    assert "per 2 GPUs (tp)" in two.stdout and "per 2 GPUs (tp)" not in one.stdout
    assert_one_line(klear("rl", "--dry-run", "--preset", "paper", "--model", "qwen3-8b", "--tensor-parallel", "3"),
                    "--tensor-parallel 3: must divide --nproc 8")
    assert_one_line(klear("rl", "--dry-run", "--model", "qwen3-8b", "--tensor-parallel", "2", "--backend", "hf",
                          "--nproc", "2"), "tensor_parallel", "vllm backend")
    assert_one_line(klear("rl", "--dry-run", "--preset", "paper", "--model", "qwen3-8b", "--tensor-parallel", "2",
                          "--prompts-per-step", "3", "--oversample", "1"),
                    "--prompts-per-step 3: fewer than the 4 vLLM engines")
    # the engines share the prompts a step generates: the paper's 2× oversample makes 3 into 6, 1 into 2
    assert klear("rl", "--dry-run", "--preset", "paper", "--model", "qwen3-8b", "--tensor-parallel", "2",
                 "--prompts-per-step", "3").returncode == 0
    assert_one_line(klear("rl", "--dry-run", "--preset", "paper", "--model", "qwen3-8b", "--tensor-parallel", "2",
                          "--prompts-per-step", "1"),
                    "--prompts-per-step 1 × --oversample 2 (2 prompts): fewer than the 4 vLLM engines")

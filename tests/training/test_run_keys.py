"""Content-addressed RL run directories (pipeline stage and ablation run): a field that changes what a run
computes moves it; a field that only watches it (RLConfig.UNKEYED: the step time limit) does not, so a run
stopped by --step-timeout-s resumes in the same directory under a longer limit."""
from flows.rl import run_dir
from tasks.pipeline.stages import rl_dir
from tasks.training.config import RLConfig


def test_the_step_limit_keeps_the_run_directory(tmp_path):
    data = tmp_path / "rl.jsonl"
    data.write_text('{"problem": "1+1?", "answer": "2"}\n')
    sft = tmp_path / "sft"
    sft.mkdir()
    (sft / "model.safetensors").write_bytes(b"weights")  # the key hashes the weights' bytes
    sft = str(sft)
    plain, limited, other = RLConfig(), RLConfig(step_timeout_s=600), RLConfig(lr=3e-4)
    assert rl_dir(str(tmp_path), sft, "ds-1", plain) == rl_dir(str(tmp_path), sft, "ds-1", limited)
    assert rl_dir(str(tmp_path), sft, "ds-1", plain) != rl_dir(str(tmp_path), sft, "ds-1", other)
    assert run_dir(str(tmp_path), sft, str(data), plain) == run_dir(str(tmp_path), sft, str(data), limited)
    assert run_dir(str(tmp_path), sft, str(data), plain) != run_dir(str(tmp_path), sft, str(data), other)
    assert set(RLConfig.UNKEYED) <= set(RLConfig.__dataclass_fields__)  # names that exist

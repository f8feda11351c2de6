"""Loading a model from several threads at once, in a fresh interpreter (transformers' lazy module imports
each model class on first use; two threads importing through it at the same moment once failed `klear sft`
with `Could not import module 'LlamaConfig'`): every thread's deep check and config load succeed."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import sys, threading
sys.path.insert(0, {root!r})
from tasks.models.checks import check_model_dir
errors, barrier = [], threading.Barrier({n})
def load():
    barrier.wait()
    try:
        check_model_dir({model!r}, deep=True)
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=load) for _ in range({n})]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(errors)
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tasks.models.factory import init_model

    return init_model(tmp_path_factory.mktemp("m") / "tiny", ["What is 1+2? \\boxed{3}"] * 20, seed=0)


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "gemma3_text"])
def test_a_model_config_loads_from_several_threads_at_once(tmp_path, tiny, model_type):
    import shutil

    model = tmp_path / model_type  # the tiny model's files with the config read as that architecture's
    shutil.copytree(tiny, model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "model_type": model_type}))
    for _ in range(1):  # a fresh interpreter: the classes are not imported yet
        r = subprocess.run([sys.executable, "-c", PROBE.format(root=str(ROOT), n=8, model=str(model))],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip() == "[]", (r.stdout[-2000:], r.stderr[-2000:])

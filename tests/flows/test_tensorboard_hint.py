"""The pipeline's closing hint `TensorBoard: COMMAND` (flows/cli_pipeline.py) works from whatever directory
the user runs it in: the tensorboard of the running interpreter's environment and the logdir, both absolute."""
import os
import shlex
import sys

from tasks.reporting import tensorboard_command


def test_the_tensorboard_command_works_from_another_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    words = shlex.split(tensorboard_command("store/models"))
    program, (flag, logdir) = words[:-2], words[-2:]
    assert program == [os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "tensorboard")]
    assert os.path.isabs(program[0]) and os.access(program[0], os.X_OK)
    assert flag == "--logdir" and logdir == str(tmp_path / "store" / "models")


def test_a_logdir_with_a_space_stays_one_word(tmp_path):
    assert shlex.split(tensorboard_command(tmp_path / "my runs"))[-1] == str(tmp_path / "my runs")

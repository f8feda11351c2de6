"""The sleep/wake order of the vLLM engine around an RL update (vllm_backend.py "Sleep"): level 2 (no host
copy of the weights), weights woken before the full weight push, KV cache after it, and no generation from
discarded weights. vLLM itself is replaced by a recording stand-in here only: the calls are what is tested,
and vLLM needs a GPU for sleep mode."""
import pytest
import torch

from tasks.generation.vllm_backend import VLLMGenerator
from tasks.training.rl_engine import _VLLMRolloutEngine


class _RecordingLLM:
    """Records the engine calls the generator makes, in order."""

    def __init__(self):
        self.calls = []

    def sleep(self, level):
        self.calls.append(("sleep", level))

    def wake_up(self, tags=None):
        self.calls.append(("wake_up", tuple(tags) if tags is not None else None))

    def collective_rpc(self, method, args=(), kwargs=None):
        pushed = [name for name, _ in (kwargs or {}).get("weights_iterator", [])]  # consumes the iterator
        self.calls.append((method, tuple(pushed)))

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))


def _generator(sleep_mode=True):
    gen = object.__new__(VLLMGenerator)  # the engine-independent state __init__ sets up
    gen.llm, gen.sleep_mode, gen.asleep, gen.weights_discarded = _RecordingLLM(), sleep_mode, frozenset(), False
    gen.in_process, gen.dtype, gen.tied = True, torch.bfloat16, False
    return gen


def test_an_rl_step_sleeps_at_level_2_and_wakes_weights_before_the_push_and_kv_cache_after():
    gen = _generator()
    engine = _VLLMRolloutEngine(gen)  # what train_rl drives
    policy = torch.nn.Linear(2, 2)
    engine.sleep()
    engine.sync_weights(policy)
    assert gen.llm.calls == [("sleep", 2), ("wake_up", ("weights",)), ("reload_weights", ("weight", "bias")),
                             ("reset_prefix_cache",), ("wake_up", ("kv_cache",))]
    assert not gen.asleep and not gen.weights_discarded


def test_no_generation_from_discarded_weights_and_no_double_sleep():
    gen = _generator()
    gen.sleep()
    gen.sleep()  # already asleep: nothing more
    with pytest.raises(RuntimeError, match="sync_weights"):
        gen.generate(["p"], None)
    assert gen.llm.calls == [("sleep", 2)]
    gen.sync_weights({"w": torch.ones(1)})
    assert not gen.weights_discarded and gen.asleep == {"kv_cache"}


def test_level_1_keeps_the_weights_so_a_plain_wake_restores_both_pools():
    gen = _generator()
    gen.sleep(level=1)
    assert not gen.weights_discarded
    gen.wake()
    gen.wake()  # awake: no call
    assert gen.llm.calls == [("sleep", 1), ("wake_up", ("weights", "kv_cache"))]
    with pytest.raises(ValueError, match="levels 1 and 2"):
        gen.sleep(level=3)


def test_without_sleep_mode_nothing_sleeps_and_a_push_wakes_nothing():
    gen = _generator(sleep_mode=False)  # CPU: vLLM's sleep mode needs CUDA
    gen.sleep()
    gen.sync_weights({"w": torch.ones(1)})
    assert gen.llm.calls == [("reload_weights", ("w",)), ("reset_prefix_cache",)]

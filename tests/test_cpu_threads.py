"""The thread policy (tasks/cpu_threads.py) on a scripted clock and CPU counters."""
import os
import subprocess
import sys

import pytest

from tasks.cpu_threads import (BRIEF_SPIN, WAIT_VARS, ThreadGovernor, pinned_threads, system_busy_seconds,
                               thread_setting, threads_for, usable_cpus)


@pytest.mark.parametrize("cpus,others,expected", [(2, 0.0, 2), (2, 0.2, 2), (2, 0.9, 1), (2, 6.0, 1),
                                                  (16, 3.0, 13), (16, 3.8, 12), (1, 0.0, 1)])
def test_threads_are_the_cpus_others_leave_free(cpus, others, expected):
    assert threads_for(cpus, others) == expected


class Script:
    """A clock and counters the test moves by hand."""

    def __init__(self):
        self.now, self.busy, self.own, self.calls = 0.0, 100.0, 1.0, []
        self.others_while_asleep = 0.0  # CPU-seconds per second others use during the first look

    def sleep(self, seconds):
        self.now += seconds
        self.busy += seconds * self.others_while_asleep


def governor(script, monkeypatch, follow_load=True, **kw):
    for var in ("KLEAR_TORCH_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    if follow_load:
        monkeypatch.setenv("KLEAR_TORCH_THREADS", "auto")
    return ThreadGovernor(interval_s=5.0, cpus=2, set_threads=script.calls.append, clock=lambda: script.now,
                          system_busy=lambda: script.busy, own_cpu=lambda: script.own, sleep=script.sleep, **kw)


def test_busy_neighbours_take_threads_away_and_give_them_back(monkeypatch):
    s = Script()
    g = governor(s, monkeypatch)
    assert g() == 2 and s.calls == [2]
    s.now, s.busy, s.own = 5.2, 100.0 + 5 * 2.0, 1.0 + 5 * 1.0  # we used 1 CPU, others 1 of 2
    assert g() == 1
    s.now, s.busy, s.own = 7.2, s.busy + 2.0, s.own + 2.0  # within the interval: not rechecked
    assert g() == 1
    s.now, s.busy, s.own = 12.2, s.busy + 7 * 1.0, s.own + 7 * 1.0  # only us now
    assert g() == 2 and s.calls == [2, 1, 2]


def test_by_default_the_count_is_every_cpu_whatever_the_load(monkeypatch):
    """The count is part of the arithmetic, so a run repeats only if its count does not follow the load."""
    s = Script()
    s.others_while_asleep = 2.0
    g = governor(s, monkeypatch, follow_load=False)
    assert g() == 2 and g.setting == 2
    s.now, s.busy = 100.0, s.busy + 1_000.0  # others keep both CPUs busy
    assert g() == 2 and s.calls == [2]
    assert thread_setting() == usable_cpus()


def test_auto_is_recorded_as_auto(monkeypatch):
    s = Script()
    g = governor(s, monkeypatch)
    assert g.setting == "auto" and thread_setting() == "auto"


def test_openmp_spins_briefly_unless_the_user_chose_how_it_waits():
    code = "import os, tasks; print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))"
    env = {k: v for k, v in os.environ.items() if k not in WAIT_VARS}
    run = lambda e: subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                                   check=True).stdout.split()
    assert run(env) == [str(BRIEF_SPIN), "None"]
    assert run({**env, "OMP_WAIT_POLICY": "passive"}) == ["None", "passive"]  # the user's policy holds
    assert run({**env, "GOMP_SPINCOUNT": "0"}) == ["0", "None"]


def test_torchs_openmp_reads_the_brief_spin():
    """The package sets it before torch loads its OpenMP runtime, which reads it once (OMP_DISPLAY_ENV). Not
    under an LD_PRELOAD of libgomp, which vLLM's CPU platform puts in its process's environment when a test
    before this one imported it: a preloaded runtime reads the environment before any Python runs."""
    env = {k: v for k, v in os.environ.items() if k not in (*WAIT_VARS, "LD_PRELOAD")}
    err = subprocess.run([sys.executable, "-c", "import tasks, torch; torch.ones(4).sum()"],
                         env={**env, "OMP_DISPLAY_ENV": "verbose"}, capture_output=True, text=True, check=True).stderr
    assert f"GOMP_SPINCOUNT = '{BRIEF_SPIN}'" in err


def test_the_first_look_happens_before_the_first_step(monkeypatch):
    s = Script()
    s.others_while_asleep = 2.0  # both CPUs busy with other work
    g = governor(s, monkeypatch)
    assert s.calls == [2, 1] and g() == 1


def test_a_pinned_count_is_kept(monkeypatch):
    s = Script()
    monkeypatch.delenv("KLEAR_TORCH_THREADS", raising=False)  # the suite sets it (tests/conftest.py)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    g = ThreadGovernor(cpus=2, set_threads=s.calls.append, clock=lambda: s.now, system_busy=lambda: s.busy,
                       own_cpu=lambda: s.own)
    s.now, s.busy = 100.0, 10_000.0
    assert g() == 1 and s.calls == [1] and g.setting == 1
    monkeypatch.setenv("KLEAR_TORCH_THREADS", "3")
    assert pinned_threads() == 3 and thread_setting() == 3
    for bad in ("0", "two", "\u00b2", "-1"):  # "²" is a digit to str.isdigit, not a count
        monkeypatch.setenv("KLEAR_TORCH_THREADS", bad)
        with pytest.raises(ValueError, match="KLEAR_TORCH_THREADS=.*: give a thread count"):
            pinned_threads()


def test_the_system_counter_moves_with_work():
    before = system_busy_seconds()
    x = 0
    for i in range(3_000_000):
        x += i
    assert before is not None and system_busy_seconds() > before


@pytest.mark.parametrize("files,own,expected", [
    ({"cpu.max": "max 100000\n"}, "", None),                                  # v2, no limit
    ({"cpu.max": "250000 100000\n"}, "", 2.5),                                # v2 at the root (a container)
    ({"pod/cpu.max": "150000 100000\n", "cpu.max": "max 100000"}, "/pod", 1.5),  # v2, the process's group
    ({"pod/init/cpu.max": "max 100000", "pod/cpu.max": "200000 100000", "cpu.max": "max 100000"}, "/pod/init",
     2.0),                                                                    # v2: a group above holds it
    ({"pod/cpu.max": "300000 100000", "cpu.max": "100000 100000"}, "/pod", 1.0),  # v2: the smallest holds
    ({"cpu.max": "100000 0"}, "", None),                                      # v2, a period of 0: none
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, "", None),  # v1, no limit
    ({"cpu,cpuacct/cpu.cfs_quota_us": "400000", "cpu,cpuacct/cpu.cfs_period_us": "100000"}, "", 4.0),
    ({}, "", None),                                                           # no cgroup files
])
def test_a_cgroup_cpu_quota_is_read(tmp_path, files, own, expected):
    from tasks.cpu_threads import cgroup_cpu_quota

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_quota(tmp_path, own=own) == expected


@pytest.mark.parametrize("quota,expected", [(None, 8), (2.5, 2), (0.5, 1), (64.0, 8)])
def test_a_quota_caps_the_cpus_rounded_down(monkeypatch, quota, expected):
    """Threads past a quota are throttled for the rest of each period while the others wait at a barrier."""
    import tasks.cpu_threads as ct

    monkeypatch.setattr(ct.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(ct, "cgroup_cpu_quota", lambda: quota)
    assert ct.usable_cpus() == expected

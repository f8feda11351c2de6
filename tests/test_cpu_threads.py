"""The thread rule (tasks/cpu_threads.py) on a scripted clock and CPU counters."""
import pytest

from tasks.cpu_threads import ThreadGovernor, pinned_threads, system_busy_seconds, threads_for


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


def governor(script, monkeypatch, **kw):
    for var in ("KLEAR_TORCH_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
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


def test_the_first_look_happens_before_the_first_step(monkeypatch):
    s = Script()
    s.others_while_asleep = 2.0  # both CPUs busy with other work
    g = governor(s, monkeypatch)
    assert s.calls == [2, 1] and g() == 1


def test_a_pinned_count_is_kept(monkeypatch):
    s = Script()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    g = ThreadGovernor(cpus=2, set_threads=s.calls.append, clock=lambda: s.now, system_busy=lambda: s.busy,
                       own_cpu=lambda: s.own)
    s.now, s.busy = 100.0, 10_000.0
    assert g() == 1 and s.calls == [1]
    monkeypatch.setenv("KLEAR_TORCH_THREADS", "3")
    assert pinned_threads() == 3


def test_the_system_counter_moves_with_work():
    before = system_busy_seconds()
    x = 0
    for i in range(3_000_000):
        x += i
    assert before is not None and system_busy_seconds() > before

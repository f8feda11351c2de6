"""The run's memory limit: given, or chosen from the memory available (memory.py's rule), and how it is
shared out."""
import pytest

from tasks.curation import memory
from tasks.curation import out_of_core as oc

GiB = 2**30


@pytest.mark.parametrize("available, limit", [
    (23 * GiB, 4 * GiB),            # a big machine: the cap
    (8 * GiB, 2 * GiB),             # a quarter of what is available
    (512 * 2**20, 256 * 2**20),     # little left: the floor
])
def test_automatic_limit_is_a_quarter_of_available_memory_capped(available, limit):
    choice = memory.choose_memory_limit(None, available=available)
    assert choice.limit == limit and choice.why.startswith("automatic: 1/4 of ")
    assert "\n" not in choice.line() and choice.line().startswith("curate memory limit ")


def test_a_given_limit_wins():
    assert memory.choose_memory_limit("3GB", available=64 * GiB).limit == 3 * 10**9
    assert memory.choose_memory_limit(123_456_789).limit == 123_456_789


def test_available_memory_is_read_from_this_machine():
    got = memory.available_memory()
    assert got is None or got > 0


def test_near_dedup_takes_one_array_on_a_million_short_rows_under_the_automatic_cap():
    whole = oc.OutOfCoreConfig(memory_limit=memory.AUTO_MAX).near_whole_limit
    assert memory.near_whole_bytes(1_000_000, 380 * 1_000_000) <= whole  # bench/curate.py's rows: 30-80 words
    assert memory.near_whole_bytes(3_000_000, 380 * 3_000_000) > whole

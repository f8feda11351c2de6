"""Bounded polls for effects that happen on their own (never a bare sleep before an assert)."""
import time


def gone_within(listing, seconds: float):
    """Poll `listing()` until it is empty or `seconds` pass; return the last listing. For removals
    that happen on their own (auto_remove after a killed client), not for ones close() waits for."""
    deadline = time.monotonic() + seconds
    while (left := listing()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left

"""Whether a DescribeQuorum poller's interval can work with the streaming job's thresholds.

The job calls a replica unreachable when no evidence of it arrived for `unreachable_after_ms`
(`health.unreachable_after_ms`). A poller is the only source of evidence for a cluster watched
from outside, so at least two polls must fall within that threshold: then one lost or late poll
does not blank a verdict. One rule, used by `quorum collect` and anything else that polls.
"""
from __future__ import annotations

POLLS_PER_THRESHOLD = 2


def max_poll_interval_ms(unreachable_after_ms: int) -> int:
    """The longest interval that keeps two polls within `unreachable_after_ms`."""
    return unreachable_after_ms // POLLS_PER_THRESHOLD


def check_poll_interval(interval_ms: int, unreachable_after_ms: int) -> str | None:
    """None when `interval_ms` works with the job's `unreachable_after_ms`, else why not, with
    the numbers and what to change."""
    if interval_ms <= 0:
        return f"the poll interval must be positive (got {interval_ms} ms)"
    if unreachable_after_ms <= 0:
        return f"the unreachable threshold must be positive (got {unreachable_after_ms} ms)"
    if POLLS_PER_THRESHOLD * interval_ms > unreachable_after_ms:
        return (f"a poll interval of {interval_ms} ms leaves fewer than {POLLS_PER_THRESHOLD} polls within the "
                f"streaming job's unreachable threshold of {unreachable_after_ms} ms, so one lost poll would make "
                f"healthy replicas look unreachable: poll every {max_poll_interval_ms(unreachable_after_ms)} ms "
                f"or less, or raise the job's health.unreachable_after_ms to at least "
                f"{POLLS_PER_THRESHOLD * interval_ms} ms")
    return None

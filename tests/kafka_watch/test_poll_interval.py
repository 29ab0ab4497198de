"""The rule that keeps a DescribeQuorum poller within the streaming job's thresholds."""
import pytest

from quorum.kafka_watch.poll_interval import check_poll_interval, max_poll_interval_ms


@pytest.mark.parametrize("interval,threshold", [(1000, 2000), (500, 2000), (1, 2), (2500, 5000)])
def test_two_polls_within_the_threshold_are_accepted(interval, threshold):
    assert check_poll_interval(interval, threshold) is None
    assert interval <= max_poll_interval_ms(threshold)


@pytest.mark.parametrize("interval,threshold", [(1001, 2000), (2000, 2000), (5000, 2000), (1, 1)])
def test_fewer_than_two_polls_within_the_threshold_are_refused_naming_the_numbers(interval, threshold):
    problem = check_poll_interval(interval, threshold)
    assert problem is not None
    assert f"{interval} ms" in problem and f"{threshold} ms" in problem
    assert f"every {max_poll_interval_ms(threshold)} ms or less" in problem  # what to change
    assert interval > max_poll_interval_ms(threshold)


def test_max_interval_is_half_the_threshold_rounded_down():
    assert max_poll_interval_ms(2000) == 1000 and max_poll_interval_ms(2001) == 1000
    assert check_poll_interval(1000, 2001) is None and check_poll_interval(1001, 2001) is not None


def test_nonsense_is_refused():
    assert "positive" in check_poll_interval(0, 2000)
    assert "positive" in check_poll_interval(1000, 0)

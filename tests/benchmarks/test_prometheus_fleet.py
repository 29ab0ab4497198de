"""prometheus_fleet.py's pure parts: the Prometheus configuration it writes, the counting of an
exposition's samples and of Prometheus' own metrics, and the figures per series."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from prometheus_fleet import Figures, marginal_bytes_per_series, metric_sum, sample_count, scrape_config  # noqa: E402


def figures(quorums: int, head_series: float, rss: int, **changed) -> Figures:
    base = dict(quorums=quorums, interval_s=10.0, series=80 * quorums, plain_bytes=1000, gzip_bytes=100,
                scrape_mean_s=0.05, scrape_max_s=0.08, head_series=head_series, prometheus_rss=rss,
                prometheus_cpu_per_s=0.02, samples_per_s=8 * quorums, samples_per_scrape=80 * quorums + 5, scrapes=6, exporter_cpu_s=0.02,
                exporter_wall_s=0.03, batch_cpu_per_s=0.01)
    return Figures(**{**base, **changed})


def test_the_exporter_is_scraped_alone_with_the_timeout_at_the_interval():
    config = scrape_config("127.0.0.1:9464", 30, "/rules.yml")
    assert [c["job_name"] for c in config["scrape_configs"]] == ["quorum_health"]
    assert config["scrape_configs"][0]["static_configs"] == [{"targets": ["127.0.0.1:9464"]}]
    assert config["global"]["scrape_interval"] == config["global"]["scrape_timeout"] == "30s"
    assert config["rule_files"] == ["/rules.yml"]


def test_samples_are_the_lines_other_than_comments():
    text = b'# HELP a A\n# TYPE a gauge\na{x="1"} 1.0\na{x="2"} 2.0\n\n# EOF\n'
    assert sample_count(text) == 2


def test_a_metric_is_summed_over_its_label_sets_and_not_confused_with_a_longer_name():
    text = ("# HELP prometheus_tsdb_head_series x\nprometheus_tsdb_head_series 1234\n"
            "prometheus_tsdb_head_series_created_total 99\n"
            'appended_total{type="float"} 10\nappended_total{type="histogram"} 5\n')
    assert metric_sum(text, "prometheus_tsdb_head_series") == 1234
    assert metric_sum(text, "appended_total") == 15
    assert metric_sum(text, "absent") == 0


def test_the_added_memory_per_added_series_leaves_the_baseline_out():
    rows = [figures(200, 16_000, 100_000_000), figures(2000, 160_000, 244_000_000)]
    assert marginal_bytes_per_series(rows) == 1000
    assert marginal_bytes_per_series(rows[:1]) is None


def test_goals_judge_against_the_interval():
    lines = [goal.line() for goal in figures(200, 16_000, 100_000_000).goals()]
    assert lines[0] == ("goal prometheus_scrape_200_quorums: 50.00 ms against the scrape interval 10000.00 ms = 0.01 "
                        "(goal <= 0.1): holds")
    assert lines[2].endswith("(goal <= 100.00 ms): holds")
    assert lines[3] == ("goal prometheus_ingest_200_quorums: 16005.00 samples against the served series "
                        "16000.00 samples = 1.00 (goal >= 0.95): holds")
    slow = figures(200, 16_000, 100_000_000, exporter_cpu_s=2.0, samples_per_scrape=8_000)
    assert [g.holds for g in slow.goals()] == [True, False, True, False]

"""docs/configuration.md lists every key the streaming job accepts, by its full dotted path, with
its default, and names no key the job does not have.

The keys and defaults are the config dataclasses: `streaming.config.JobConfig` and the sections it
nests (`HealthConfig`, `SinkConfig` and theirs). The doc writes each key as a table row whose
first two cells are the key and its default, both in backticks:

    | `source.bootstrap_servers` | `127.0.0.1:9092` | meaning |

Defaults are rendered as YAML writes them: `true` / `false`, `null`, numbers plain (`200000`,
`2.0`), strings without quotes, `{}` for an empty mapping. A health threshold whose default is
derived from the quorum's timeouts is `null` in the dataclass and in the doc.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from streaming.config import JobConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
# a table row that documents a key: | `key` | `default` | ...
ROW = re.compile(r"^\|\s*`([a-z_]+(?:\.[a-z_]+)+)`\s*\|\s*`([^`]*)`\s*\|", re.M)
# a key named anywhere in the text: the whole of a code span, dotted, starting with a section
SPAN = re.compile(r"`([a-z_]+(?:\.[a-z_]+)+)`")
# Spark's own settings (`spark.sql.shuffle.partitions`, set under `spark.conf`) share the
# `spark.` prefix with the job's section, and file names (`job.yaml`) look like keys
NOT_A_KEY = re.compile(r"^spark\.|\.(?:ya?ml|json|md|py|sh|properties|jks)$")


def walk(cls: type, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, default) of every leaf key of a config dataclass, nested sections walked."""
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory):
            yield from walk(f.default_factory, f"{path}.")
        elif f.default is not dataclasses.MISSING:
            yield path, f.default
        else:
            yield path, f.default_factory()


def sections(cls: type, prefix: str = "") -> Iterator[str]:
    """Every section's dotted path (`sink`, `sink.prometheus`, ...)."""
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory):
            yield f"{prefix}{f.name}"
            yield from sections(f.default_factory, f"{prefix}{f.name}.")


def render(value: Any) -> str:
    """A default as YAML writes it (and as the doc shows it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        if value:
            raise AssertionError(f"no rendering rule for a non-empty mapping default: {value!r}")
        return "{}"
    if isinstance(value, str):
        return value
    raise AssertionError(f"no rendering rule for a default of type {type(value).__name__}: {value!r}")


KEYS = dict(walk(JobConfig))
SECTIONS = set(sections(JobConfig))


def documented_rows(text: str) -> list[tuple[str, str]]:
    return ROW.findall(text)


def test_the_walk_finds_every_section_and_nested_keys():
    # guards the walk itself: a change in the dataclasses' shape must not make the tests check nothing
    assert {"spark", "source", "decode", "job", "dead_letters", "health", "sink", "sink.prometheus",
            "sink.kafka", "sink.console"} == SECTIONS
    assert KEYS["source.bootstrap_servers"] == "127.0.0.1:9092"
    assert KEYS["sink.prometheus.pushgateway_url"] == "http://127.0.0.1:9091"
    assert KEYS["health.unreachable_after_ms"] is None
    assert len(KEYS) > 40


@pytest.mark.parametrize("key", sorted(KEYS))
def test_every_key_is_documented_with_its_default(key):
    rows = [default for name, default in documented_rows(DOC.read_text()) if name == key]
    assert rows, f"docs/configuration.md has no row for `{key}` (default `{render(KEYS[key])}`)"
    assert rows == [render(KEYS[key])], \
        f"docs/configuration.md: `{key}` documented with default(s) {rows}, the code's is `{render(KEYS[key])}`"


def test_the_doc_documents_no_key_that_does_not_exist():
    unknown = sorted({name for name, _ in documented_rows(DOC.read_text())} - KEYS.keys())
    assert not unknown, f"docs/configuration.md documents keys the job does not have: {unknown}"


def test_the_doc_names_no_key_that_does_not_exist():
    first_segments = {path.split(".")[0] for path in KEYS}
    named = {span for span in SPAN.findall(DOC.read_text())
             if span.split(".")[0] in first_segments and not NOT_A_KEY.search(span)}
    unknown = sorted(named - KEYS.keys() - SECTIONS)
    assert not unknown, f"docs/configuration.md names keys the job does not have: {unknown}"


def test_the_checks_would_catch_a_missing_a_wrong_and_an_unknown_key():
    text = DOC.read_text()
    row = re.search(r"^\|\s*`source\.fail_on_data_loss`.*\n", text, re.M)
    assert row, "the doc's row for source.fail_on_data_loss"
    without = text.replace(row.group(0), "")
    assert "source.fail_on_data_loss" not in {name for name, _ in documented_rows(without)}
    wrong = text.replace("| `source.fail_on_data_loss` | `false` |", "| `source.fail_on_data_loss` | `true` |")
    assert dict(documented_rows(wrong))["source.fail_on_data_loss"] != render(KEYS["source.fail_on_data_loss"])
    extra = text + "\n| `source.kind` | `auto` | gone |\n"
    assert {name for name, _ in documented_rows(extra)} - KEYS.keys() == {"source.kind"}


def test_render_writes_yaml_scalars():
    assert [render(v) for v in (True, False, None, 200_000, 2.0, 0.2, "local[*]", {})] == \
        ["true", "false", "null", "200000", "2.0", "0.2", "local[*]", "{}"]

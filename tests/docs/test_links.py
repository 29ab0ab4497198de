"""Every relative link in README.md and docs/*.md points at a file (or directory) that exists,
and every `#anchor`, in the same page or in another Markdown file, is the slug of one of the
target's headings under GitHub's rules: lowercase, spaces to hyphens, every other character
that is not a letter, a digit, a hyphen or an underscore removed; a repeated heading gets
`-1`, `-2`, ... Links and headings inside fenced code blocks do not count."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.M | re.S)   # indented too (in lists)
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
# [text](target) and ![alt](target); a target may carry a "title"
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)   # http:, https:, mailto:, ...


def prose(text: str) -> str:
    """The text without its fenced code blocks."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # a link's text only
    text = re.sub(r"<[^>]+>", "", text)                          # inline HTML tags
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)                         # \w keeps letters, digits, _
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, heading in HEADING.findall(prose(path.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path: Path) -> list[str]:
    text = INLINE_CODE.sub("", prose(path.read_text()))
    return [target for target in LINK.findall(text) if not EXTERNAL.match(target)]


def broken_links(path: Path) -> list[str]:
    problems = []
    for target in links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: no such file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
        elif anchor and dest.suffix != ".md":
            problems.append(f"{target}: an anchor into a file that is not Markdown")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)}: " + "; ".join(broken_links(page))


def test_the_pages_link_to_each_other():
    # guards the discovery: README links every page of docs/, so the test above checks real links
    readme_targets = {target.partition("#")[0] for target in links(ROOT / "README.md")}
    assert {f"docs/{p.name}" for p in PAGES[1:]} <= readme_targets


def test_slugs_follow_githubs_rules():
    assert slug("Run it against your own Kafka") == "run-it-against-your-own-kafka"
    assert slug("Cause: partitioned") == "cause-partitioned"
    assert slug("`sink.prometheus`: Prometheus output") == "sinkprometheus-prometheus-output"
    assert slug("The job's stages, and why") == "the-jobs-stages-and-why"
    assert slug("snake_case and hyphen-ated") == "snake_case-and-hyphen-ated"


def test_the_check_would_catch_a_broken_link_and_a_missing_anchor(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## A section\n")
    page.write_text("# Page\n\n[ok](other.md#a-section) [self](#page) [gone](missing.md) "
                    "[bad](other.md#no-such-section) [web](https://example.com/x.md)\n\n"
                    "```sh\n# not a heading\n[not a link](nowhere.md)\n```\n\n"
                    "1. a step\n\n   ```sh\n   [in a list's code](nowhere.md)\n   ```\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        problems = broken_links(page)
    finally:
        ROOT = saved
    assert len(problems) == 2 and "missing.md" in problems[0] and "#no-such-section" in problems[1]
    assert anchors(page) == {"page"}

"""The docs agree with the tree: README.md is an entry point, every relative
link in README.md and docs/ resolves, no issue numbers or work-log history,
and what the binaries print is what the docs say."""
import json
import re
from pathlib import Path

from conftest import ROOT, STOKER, run

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "client" / "python" / "README.md",
        *sorted((ROOT / "deploy").glob("*/README.md"))]

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
# "issue 19", "issues 17 and 18", "issue-19", "#8" (not "tensorflow#52252"),
# "session 4", "sessions 15 and 16".
HISTORY = re.compile(
    r"\bissues?[ -]\d|(?<![\w/])#\d|\bsessions? \d|\bsession-\d",
    re.IGNORECASE)


def prose(path):
    """The file's text without its code blocks."""
    return FENCE.sub("", path.read_text())


def test_readme_is_an_entry_point():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 300
    assert lines[3].startswith("bench/demo.sh")
    assert lines[4].startswith("tests/run.sh")


def test_every_relative_link_resolves():
    broken = []
    for doc in DOCS:
        for target in LINK.findall(prose(doc)):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # A URL, or an anchor in the same file.
            path = (doc.parent / target.split("#")[0]).resolve()
            if not path.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert broken == []


def test_no_issue_numbers_or_work_log_history():
    found = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            if HISTORY.search(line):
                found.append(f"{doc.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


def test_pack_help_names_every_image_format_it_takes():
    out = run([STOKER, "pack", "--help"]).stdout
    flat = " ".join(out.split())
    assert "JPEG, PNG, WebP or TIFF" in flat
    assert "neither JPEG nor PNG" not in flat


def test_every_field_of_stream_json_is_documented(daemon):
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               "train", "--pipeline", "train", "--batch-size", 8,
               "--epochs", 1, "--quiet", "--json"]).stdout
    fields = json.loads(out.splitlines()[-1])
    doc = (ROOT / "docs" / "streaming.md").read_text()
    assert [f for f in fields if f"`{f}`" not in doc] == []

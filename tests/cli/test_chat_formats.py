"""`precdx diagnose --format slack|lark|text|markdown` for chat: a Slack message payload, a Lark
post in both languages, a length cap (--max-length) and a closing link (--report-url)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from precdx.cli import main
from tests.service.test_chat import LARK_POST_SCHEMA

CASE = Path(__file__).resolve().parents[2].parent / "shared" / "scenarios" / "case-05"
URL = "https://reports.example/run-42.html"


def run(*args: str):
    if not CASE.is_dir():
        pytest.skip("scenario case-05 not available")
    return CliRunner().invoke(main, ["diagnose", str(CASE), "--engine", "python", *args])


def test_slack_payload_from_the_cli():
    r = run("--format", "slack", "--report-url", URL)
    assert r.exit_code == 0, r.output
    msg = json.loads(r.output)
    assert msg["blocks"] and "**" not in re.sub(r"`[^`]*`", "", msg["text"])
    assert msg["text"].endswith(f"<{URL}|Full report>")


def test_lark_post_from_the_cli_has_both_languages():
    r = run("--format", "lark", "--lang", "zh", "--max-length", "6000")
    assert r.exit_code == 0, r.output
    msg = json.loads(r.output)
    jsonschema.validate(msg, LARK_POST_SCHEMA)
    assert set(msg["content"]["post"]) == {"zh_cn", "en_us"} and len(r.output.strip().encode()) <= 6000


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_text_and_markdown_take_a_cap_and_a_link(fmt):
    full = run("--format", fmt)
    capped = run("--format", fmt, "--max-length", "900", "--report-url", URL)
    assert full.exit_code == 0 and capped.exit_code == 0, capped.output
    assert len(capped.output.rstrip("\n")) <= 900 < len(full.output)
    assert URL in capped.output and URL not in full.output


def test_a_cap_below_the_minimum_is_a_usage_error():
    r = run("--format", "slack", "--max-length", "50")
    assert r.exit_code == 2 and "--max-length" in r.output


def test_chat_options_with_a_non_chat_format_are_refused():
    r = run("--format", "json", "--report-url", URL)
    assert r.exit_code == 2 and "chat reply" in r.output

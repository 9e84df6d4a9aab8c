"""The built documentation site (`make docs-site` builds it into build/docs/html, then runs these tests on it)."""

from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope='session')
def site() -> pathlib.Path:
    html = pathlib.Path(os.environ.get('VLLM_DR_DOCS_HTML', ROOT / 'build' / 'docs' / 'html'))
    if not (html / 'index.html').is_file():
        pytest.fail(f'no documentation site in {html}: build it first with `make docs-site`')
    return html


@pytest.fixture(scope='session')
def reports() -> pathlib.Path:
    """Where the browser check leaves its screenshots (reports/docs-site/)."""
    path = pathlib.Path(os.environ.get('VLLM_DR_REPORTS', ROOT / 'reports')) / 'docs-site'
    path.mkdir(parents=True, exist_ok=True)
    return path

"""The built documentation site opened as `make docs` tells a reader to (file://), in headless Chromium (Debian's
`chromium`, bindep.txt): the search page runs its JavaScript and finds pages, a module page renders. Each page's DOM
after its scripts ran is checked; the screenshots go to reports/docs-site/."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess

import pytest

WIDTH, HEIGHT = 1280, 1000


@pytest.fixture(scope='module')
def chromium():
    path = shutil.which('chromium') or shutil.which('chromium-browser')
    if path is None:
        pytest.fail('chromium is not installed: install the [test] profile of bindep.txt (make deps does)')
    return path


def _browse(chromium, tmp_path, url, *output):
    """Chromium's output for `url` once its scripts have run (virtual time lets them finish, without a wall clock)."""
    command = [chromium, '--headless', '--disable-gpu', '--hide-scrollbars', f'--window-size={WIDTH},{HEIGHT}',
               f'--user-data-dir={tmp_path / "profile"}', '--virtual-time-budget=20000', *output, url]
    if os.geteuid() == 0:
        command.insert(1, '--no-sandbox')  # Chromium refuses to run as root with its sandbox
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dom_after_scripts(chromium, tmp_path, url):
    return _browse(chromium, tmp_path, url, '--dump-dom')


def screenshot(chromium, tmp_path, url, path):
    _browse(chromium, tmp_path, url, f'--screenshot={path}')
    with open(path, 'rb') as handle:
        head = handle.read(24)
    assert head[:8] == b'\x89PNG\r\n\x1a\n', f'{path} is not a PNG'
    assert struct.unpack('>II', head[16:24]) == (WIDTH, HEIGHT), f'{path} is not a {WIDTH}x{HEIGHT} screenshot'
    assert os.path.getsize(path) > 20000, f'{path} is too small to show a rendered page'


def test_search_page_finds_the_sweep_module(chromium, site, reports, tmp_path):
    url = (site / 'search.html').as_uri() + '?q=sweep'
    dom = dom_after_scripts(chromium, tmp_path, url)
    found = re.search(r'Search finished, found (\d+) pages? matching the search query', dom)
    assert found, 'the search did not finish: its JavaScript did not run or found no page'
    assert int(found.group(1)) >= 1
    results = re.findall(r'<li[^>]*><a href="([^"]+)"', dom.split('<ul class="search"', 1)[-1])
    assert 'collections/inferops/vllm_dr/vllm_session_sweep_module.html' in [r.split('?')[0] for r in results], results
    screenshot(chromium, tmp_path, url, reports / 'search.png')


def test_module_page_renders_its_title_options_and_navigation(chromium, site, reports, tmp_path):
    url = (site / 'collections' / 'inferops' / 'vllm_dr' / 'vllm_token_cache_module.html').as_uri()
    dom = dom_after_scripts(chromium, tmp_path, url)
    assert re.search(r'<h1>inferops\.vllm_dr\.vllm_token_cache module', dom), 'no module title'
    assert 'id="parameter-state"' in dom, 'the options table did not render'
    assert 'id="return-stale"' in dom, 'the return values table did not render'
    assert re.search(r'class="toctree-l1 current"', dom), 'the navigation does not mark the current page'
    screenshot(chromium, tmp_path, url, reports / 'module.png')

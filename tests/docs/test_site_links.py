"""The built documentation site as a reader follows it: every internal link and anchor leads somewhere, the guides
kept as Markdown in docs/ are pages of it, and no link leads to a repository of the collection (it has none)."""

from __future__ import annotations

import pathlib
import re
from urllib.parse import urlsplit

import pytest

from harness.site_links import check_site

ROOT = pathlib.Path(__file__).resolve().parents[2]
# the guides kept as Markdown in docs/, and where the site puts them
MARKDOWN_GUIDES = {'runbook.md': 'guides/runbook.html', 'aap.md': 'guides/aap.html'}


@pytest.fixture(scope='module')
def site_links(site):
    return check_site(str(site))


def test_every_internal_link_and_anchor_of_the_site_resolves(site_links):
    broken, _external = site_links
    assert not broken, f'{len(broken)} internal links lead nowhere:\n' + '\n'.join(broken[:40])


def test_site_links_to_no_repository_of_the_collection(site_links):
    """The collection has no public repository or Galaxy page yet: a link to one leads to a 404."""
    _broken, external = site_links
    own = [f'{link.page}: {link.url}' for link in external
           if 'inferops' in link.url or urlsplit(link.url).netloc == 'galaxy.ansible.com']
    assert not own, f'{len(own)} links to a repository or Galaxy page that does not exist:\n' + '\n'.join(own[:20])


def test_site_includes_the_markdown_guides_and_links_them_from_its_home_page(site):
    home = (site / 'index.html').read_text(encoding='utf-8')
    for source, page in MARKDOWN_GUIDES.items():
        title = (ROOT / 'docs' / source).read_text(encoding='utf-8').splitlines()[0].lstrip('# ').strip()
        rendered = (site / page).read_text(encoding='utf-8')
        # the guide's title as its heading (Sphinx escapes quotes and ampersands; compare the words)
        assert re.sub(r'\W+', ' ', title) in re.sub(r'\W+', ' ', re.sub(r'&\w+;', ' ', rendered)), (page, title)
        assert f'href="{page}"' in home, f'the home page does not link {page}'


def test_link_check_finds_a_missing_page_a_missing_anchor_and_a_link_out_of_the_site(tmp_path):
    (tmp_path / 'sub').mkdir()
    (tmp_path / 'index.html').write_text(
        '<a id="top" href="sub/page.html#here">ok</a><a href="sub/page.html#gone">anchor</a>'
        '<a href="missing.html">page</a><a href="../outside.html">out</a><a href="#top">self</a>'
        '<a href="https://example.org/x">external</a><a href="mailto:sre@example.org">mail</a>', encoding='utf-8')
    (tmp_path / 'sub' / 'page.html').write_text(
        '<h1 id="here">Page</h1><a class="logo" href="index.html">logo</a><img src="../img.png">', encoding='utf-8')
    broken, external = check_site(str(tmp_path))
    assert broken == [
        'index.html: sub/page.html#gone: sub/page.html has no element with id "gone"',
        'index.html: missing.html: missing.html does not exist',
        'index.html: ../outside.html leads out of the site',
        'sub/page.html: index.html: sub/index.html does not exist',
        'sub/page.html: ../img.png: img.png does not exist',
    ]
    assert [link.url for link in external] == ['https://example.org/x']

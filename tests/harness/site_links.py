"""Every link of a built HTML site, checked offline: each internal link leads to a file of the site and each of its
anchors to an element id of that page; the external links are returned for the caller to judge (no network).

What Sphinx's linkcheck builder does for internal targets, on the HTML a reader gets (the theme's own links, such as
the logo's, included), without a second build."""

from __future__ import annotations

import html.parser
import os
import posixpath
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

# the attributes that make the browser load or follow a URL
_URL_ATTRIBUTES = {'a': 'href', 'link': 'href', 'area': 'href', 'script': 'src', 'img': 'src', 'iframe': 'src',
                   'source': 'src'}
_NOT_FOLLOWED = ('mailto:', 'javascript:', 'data:', 'tel:')


@dataclass(frozen=True)
class Link:
    page: str  # the page's path inside the site, with '/'
    url: str


@dataclass
class Page:
    ids: set = field(default_factory=set)
    links: list = field(default_factory=list)


class _PageParser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ('id', 'name') if tag == 'a' else ('id',):
            if attrs.get(name):
                self.page.ids.add(attrs[name])
        wanted = _URL_ATTRIBUTES.get(tag)
        if wanted and attrs.get(wanted) is not None:
            self.page.links.append(attrs[wanted])


def read_page(path: str) -> Page:
    parser = _PageParser()
    with open(path, encoding='utf-8') as handle:
        parser.feed(handle.read())
    parser.close()
    return parser.page


def read_site(root: str) -> dict:
    """{page path relative to root: Page} of every .html file under root."""
    pages = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith('.html'):
                path = os.path.join(folder, name)
                pages[os.path.relpath(path, root).replace(os.sep, '/')] = read_page(path)
    return pages


def is_external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme or parts.netloc)


def broken_link(root: str, pages: dict, page: str, url: str) -> str | None:
    """Why an internal link of `page` leads nowhere, in one line; None when it leads to a file (and its anchor)."""
    parts = urlsplit(url)
    target = page
    if parts.path:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page), unquote(parts.path)))
        if target.startswith('../') or target == '..':
            return f'{url} leads out of the site'
        if os.path.isdir(os.path.join(root, target)):
            target = posixpath.join(target, 'index.html')
        if not os.path.isfile(os.path.join(root, target)):
            return f'{url}: {target} does not exist'
    anchor = unquote(parts.fragment)
    if anchor and target in pages and anchor not in pages[target].ids:
        return f'{url}: {target} has no element with id "{anchor}"'
    return None


def check_site(root: str) -> tuple:
    """(broken, external): every internal link that leads nowhere, as 'page: reason'; every external Link."""
    pages = read_site(root)
    broken, external = [], []
    for page, content in sorted(pages.items()):
        for url in content.links:
            if not url or url.startswith(_NOT_FOLLOWED):
                continue
            if is_external(url):
                external.append(Link(page, url))
                continue
            reason = broken_link(root, pages, page, url)
            if reason:
                broken.append(f'{page}: {reason}')
    return broken, external

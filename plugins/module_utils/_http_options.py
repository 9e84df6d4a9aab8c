# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Checks of the HTTP options (URLs, CA bundles, timeouts, headers) made before anything is called.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import math
import os
import urllib.parse

HTTP_SCHEMES = ('http', 'https')
# More than a day for one HTTP call is a mistake, and beyond about 1e9 seconds the socket layer overflows.
MAX_TIMEOUT_SECONDS = 86400


class HttpOptionError(ValueError):
    """A bad HTTP option; the message is one line naming the option and the fix, never a header value."""


def check_http_url(url: str, option: str) -> str:
    """``url`` if it is an http(s) URL with a host. open_url also reads file:// and ftp:// URLs: never wanted here."""
    parts = urllib.parse.urlsplit(url or '')
    # the URL itself is not repeated: it may carry user:password@
    if not parts.scheme:
        raise HttpOptionError(f'{option} has no scheme; give the endpoint\'s full URL, starting with https:// or http://')
    if parts.scheme.lower() not in HTTP_SCHEMES:
        raise HttpOptionError(f'{option} must be an http:// or https:// URL, not {parts.scheme}://; '
                              'give the endpoint\'s URL')
    if not parts.hostname:
        raise HttpOptionError(f'{option} has no host; give a URL such as https://vllm.example.com/...')
    return url


def check_file(path: str | None, option: str, what: str) -> str | None:
    """``path`` if it is None or names a readable regular file."""
    if path is None:
        return None
    if not os.path.isfile(path):
        raise HttpOptionError(f'{option} {path} does not exist or is not a file; give the path of {what}')
    if not os.access(path, os.R_OK):
        raise HttpOptionError(f'{option} {path} is not readable by this user; fix its mode or give another copy of {what}')
    return path


def check_timeout(seconds: float, option: str = 'timeout') -> float:
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_TIMEOUT_SECONDS:
        raise HttpOptionError(f'{option} {seconds:g} is out of range; give seconds more than 0 and at most '
                              f'{MAX_TIMEOUT_SECONDS} (default 10)')
    return seconds


def check_headers(headers: dict | None, option: str = 'headers') -> dict:
    """Header values as strings; a value with a line break would be refused by the HTTP client with the value
    in its message, so it is refused here, by name."""
    checked = {}
    for name, value in (headers or {}).items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise HttpOptionError(f'{option}: the value of {name} is a {type(value).__name__}; give a string')
        text = str(value)
        if '\r' in text or '\n' in text or '\r' in name or '\n' in name:
            raise HttpOptionError(f'{option}: {name!r} holds a line break; give a header on one line')
        checked[name] = text
    return checked

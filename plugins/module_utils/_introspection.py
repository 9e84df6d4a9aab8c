# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""RFC 7662 token introspection: is this refresh token still active at the identity provider?

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse

from ansible.module_utils.urls import Request

from ._http_options import HttpOptionError, check_file, check_http_url
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError


class Introspector:
    """Asks ``url`` about tokens with client_secret_basic authentication; never puts a token in a message."""

    def __init__(self, url: str, client_id: str, client_secret: str, timeout: float = 10,
                 validate_certs: bool = True, ca_path: str | None = None):
        if not url or not client_id:
            raise StoreError('select=revoked needs introspection_url and introspection_client_id '
                             '(and introspection_client_secret) of the identity provider')
        try:
            self.url = check_http_url(url, 'introspection_url')
            self.ca_path = check_file(ca_path, 'introspection_ca_path',
                                      'the CA bundle that signed the identity provider\'s certificate')
        except HttpOptionError as exc:
            raise StoreError(str(exc)) from None
        self.timeout = timeout
        self.validate_certs = validate_certs
        self._request = _reusable_request(timeout, validate_certs, self.ca_path)
        pair = f'{urllib.parse.quote(client_id, safe="")}:{urllib.parse.quote(client_secret or "", safe="")}'
        self._headers = {
            'Authorization': 'Basic ' + base64.b64encode(pair.encode()).decode('ascii'),
            'Content-Type': 'application/x-www-form-urlencoded',
            'Accept': 'application/json',
        }
        self.calls = 0

    def active(self, token: bytes, hint: str = 'refresh_token') -> bool:
        body = urllib.parse.urlencode({'token': token.decode('utf-8', 'replace'), 'token_type_hint': hint})
        self.calls += 1
        try:
            response = self._request.open('POST', self.url, data=body, headers=self._headers)
            reply = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise StoreError(f'the introspection endpoint {self.url} rejected the client credentials (HTTP {exc.code}); '
                                 'check introspection_client_id and introspection_client_secret') from None
            raise StoreError(f'the introspection endpoint {self.url} answered HTTP {exc.code}; '
                             'check introspection_url; nothing was deleted for the sessions not yet judged') from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, 'reason', exc)
            raise StoreError(f'cannot ask the introspection endpoint {self.url} ({reason}); '
                             'check introspection_url and that the identity provider is up') from None
        if not isinstance(reply, dict) or 'active' not in reply:
            raise StoreError(f'the introspection endpoint {self.url} did not answer per RFC 7662 (no "active"); '
                             'check introspection_url')
        return reply['active'] is True


def _reusable_request(timeout: float, validate_certs: bool, ca_path):
    """An HTTP client for many requests: its TLS context is made once.

    Making a TLS context reads the CA bundle, and open_url makes one per request (about a
    tenth of a second); select=revoked asks once per session.
    """
    settings = dict(timeout=timeout, validate_certs=validate_certs, ca_path=ca_path)
    try:
        from ansible.module_utils.urls import make_context  # pylint: disable=import-outside-toplevel
        return Request(context=make_context(cafile=ca_path, validate_certs=validate_certs), **settings)
    except (ImportError, TypeError):  # an ansible-core without a reusable context
        return Request(**settings)

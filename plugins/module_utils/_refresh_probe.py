# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Call the vLLM refresh endpoint and /healthz, and say what the answer means.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import json
import math
import ssl
import time
import urllib.error

from ansible.module_utils.urls import open_url

from ._timestamps import iso_utc

HEALTHY, STALE, UNAUTHORIZED, SERVER_ERROR = 'healthy', 'stale_token', 'unauthorized', 'server_error'
UNREACHABLE, TLS_ERROR, UNEXPECTED = 'unreachable', 'tls_error', 'unexpected'
# the OAuth error codes of a client the identity provider refuses (unknown, wrong secret, grant not allowed)
CLIENT_ERRORS = ('invalid_client', 'unauthorized_client')
BACKOFF_SECONDS = 0.5
DEFAULT_EXPIRES_IN = 3600
# Longer than any access token lives; beyond it the expiry is not a date the store can hold.
MAX_EXPIRES_IN = 10 * 366 * 86400

ADVICE = {
    STALE: 'the refresh token was rotated or revoked at the identity provider: purge the token cache, '
           'sweep the sessions and restart the service (the inferops.vllm_dr runbook)',
    UNAUTHORIZED: 'the endpoint or its identity provider refused the client: check client_id, the probe session '
                  'and the service\'s client credentials at the identity provider',
    SERVER_ERROR: 'the service or its identity provider is failing: check their logs',
    UNREACHABLE: 'nothing answered: check url and that the service is up',
    TLS_ERROR: 'the TLS handshake failed: give http_ca_path (or http_client_cert) or check the host name',
    UNEXPECTED: 'the answer is not a refresh response: check url',
}


class Http:
    """open_url with the TLS options of the module; never logs a header."""

    def __init__(self, timeout: float, validate_certs: bool, ca_path=None, client_cert=None, client_key=None,
                 headers=None):
        self.options = dict(timeout=timeout, validate_certs=validate_certs, ca_path=ca_path,
                            client_cert=client_cert, client_key=client_key)
        self.headers = dict(headers or {})

    def call(self, url: str, method: str = 'GET', body=None, headers=None):
        """(status, parsed JSON or None, failure): failure is (classification, reason) when no HTTP answer came."""
        all_headers = dict(self.headers, **(headers or {}))
        try:
            response = open_url(url, data=body, method=method, headers=all_headers, **self.options)
            return response.status, _json(response.read()), None
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read()), None
        except (ssl.SSLError, ssl.CertificateError) as exc:
            return None, None, (TLS_ERROR, _reason(exc))
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (ssl.SSLError, ssl.CertificateError)) or 'CERTIFICATE_VERIFY_FAILED' in str(reason):
                return None, None, (TLS_ERROR, _reason(reason))
            return None, None, (UNREACHABLE, _reason(reason))
        except (OSError, ValueError) as exc:
            if 'certificate' in str(exc).lower() or 'ssl' in type(exc).__name__.lower():
                return None, None, (TLS_ERROR, _reason(exc))
            return None, None, (UNREACHABLE, _reason(exc))


def _json(raw: bytes):
    try:
        return json.loads(raw or b'null')
    except ValueError:
        return None


def _reason(exc) -> str:
    return str(getattr(exc, 'reason', None) or exc).splitlines()[0][:200]


def classify(status, body, failure) -> tuple:
    """(classification, error, error_description) for one answer."""
    if failure is not None:
        return failure[0], failure[1], None
    body = body if isinstance(body, dict) else {}
    error, description = body.get('error'), body.get('error_description')
    if 200 <= status < 300:
        if body.get('refresh_token') or body.get('access_token'):
            return HEALTHY, None, None
        return UNEXPECTED, 'no token in the response', None
    # judged by the OAuth error code (RFC 6749 5.2), not the status alone: Keycloak answers a rotated refresh token
    # 400 invalid_grant where the write-up's gateway says 401, and a client it refuses 400 or 401 invalid_client
    if status in (400, 401) and error == 'invalid_grant':
        return STALE, error, description
    if status in (401, 403) or (400 <= status < 500 and error in CLIENT_ERRORS):
        return UNAUTHORIZED, error or f'HTTP {status}', description
    if status >= 500:
        return SERVER_ERROR, error or f'HTTP {status}', description
    return UNEXPECTED, error or f'HTTP {status}', description


def refresh(http: Http, url: str, client_id: str, refresh_token: str, retries: int) -> tuple:
    """(result, tokens): POST the refresh; retry connection failures and 5xx with backoff, never a 4xx."""
    started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        status, body, failure = http.call(url, 'POST', json.dumps({'client_id': client_id}),
                                          {'Authorization': f'Bearer {refresh_token}', 'Content-Type': 'application/json'})
        classification, error, description = classify(status, body, failure)
        retryable = classification in (UNREACHABLE, SERVER_ERROR)
        if not retryable or attempts > retries:
            break
        time.sleep(BACKOFF_SECONDS * 2 ** (attempts - 1))
    result = {'status': status, 'classification': classification, 'error': error, 'error_description': description,
              'attempts': attempts, 'elapsed_ms': int((time.monotonic() - started) * 1000)}
    return result, (body if classification == HEALTHY else None)


def settled_refresh(http: Http, url: str, client_id: str, token: bytes, retries: int, confirmations: int,
                    stored_token=None, sleep=time.sleep) -> tuple:
    """(result, tokens, token presented last): refresh(), where one stale_token answer is not taken at its word.

    A stale_token answer is asked again up to ``confirmations`` times, with backoff, and counts only when every
    answer is stale_token (a provider's transient invalid_grant passes). Before each new try the session's stored
    refresh token is read again (``stored_token()``: bytes, or None when there is no store): when it is no longer
    the token presented, the service refreshed its own session while the probe ran (a race, RV raced), and the
    stored token is presented instead. ``stale_answers`` counts the stale_token answers.
    """
    stale_answers, raced = 0, False
    for attempt in range(confirmations + 1):
        result, answer = refresh(http, url, client_id, token.decode('utf-8', 'replace'), retries)
        if result['classification'] != STALE:
            break
        stale_answers += 1
        if attempt == confirmations:
            break
        sleep(BACKOFF_SECONDS * 2 ** attempt)
        current = stored_token() if stored_token is not None else None
        if current and current != token:
            raced, token = True, current
    result.update(stale_answers=stale_answers, raced=raced)
    return result, answer, token


def answer_secrets(body) -> set:
    """Every token string of a refresh answer: registered as no-log values before the answer is judged."""
    if not isinstance(body, dict):
        return set()
    return {value for name, value in body.items() if name.endswith('_token') and isinstance(value, str) and value}


def _expires_at(value):
    """(ISO expiry, problem) for the answer's expires_in: seconds from now, 1 to MAX_EXPIRES_IN."""
    if value is None:
        return iso_utc(time.time() + DEFAULT_EXPIRES_IN), None
    seconds = None
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except ValueError:
            pass
    if seconds is None or not math.isfinite(seconds) or not 0 < seconds <= MAX_EXPIRES_IN:
        return None, f'the refresh answer\'s expires_in is not a number of seconds from 1 to {MAX_EXPIRES_IN}'
    return iso_utc(time.time() + seconds), None


def read_rotation(body: dict, presented: bytes) -> tuple:
    """(fields to store, problem) for a 2xx refresh answer.

    ``fields`` is empty when the answer holds no new refresh token; when it holds one, the fields are
    storable whatever else is wrong with the answer, so that a rotated token is never lost; ``problem``
    is one line saying what is wrong, or None.
    """
    new_token = body.get('refresh_token')
    if new_token is not None and not isinstance(new_token, str):
        return {}, f'the refresh answer\'s refresh_token is a {type(new_token).__name__}, not a string; check url'
    if not new_token or new_token.encode() == presented:
        return {}, None
    fields = {b'refresh_token': new_token.encode()}
    problems = []
    access_token = body.get('access_token')
    if isinstance(access_token, str) and access_token:
        fields[b'access_token'] = access_token.encode()
    elif access_token is not None:
        problems.append(f'the refresh answer\'s access_token is a {type(access_token).__name__}, not a string')
    expires_at, problem = _expires_at(body.get('expires_in'))
    if expires_at is not None:
        fields[b'expires_at'] = expires_at.encode()
    if problem:
        problems.append(problem)
    return fields, '; '.join(problems) or None


def health(http: Http, url: str):
    status, _body, failure = http.call(url)
    return status, (None if failure is None else failure[1])


def failure_message(result: dict) -> str:
    """One line for expect=healthy: the classification, the provider's words, the fix."""
    parts = [f'refresh probe: {result["classification"]}']
    if result.get('status'):
        parts.append(f'HTTP {result["status"]}')
    if result.get('error'):
        parts.append(str(result['error']) + (f': {result["error_description"]}' if result.get('error_description') else ''))
    if result['classification'] == HEALTHY and result.get('health_status') != 200:
        return f'refresh probe: healthy refresh but health check answered {result.get("health_status")}; check health_url'
    return ', '.join(parts) + f'; {ADVICE.get(result["classification"], "")}'.rstrip('; ')

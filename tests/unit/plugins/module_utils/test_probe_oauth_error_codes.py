"""The probe judges a refused refresh by its OAuth error code (RFC 6749 5.2), not by the HTTP status alone.

The answers are Keycloak 26's and the lab gateway's, as they come over the wire; tests/functional/
test_keycloak_provider.py gets the same answers from a running Keycloak.
"""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._refresh_probe import (
    STALE, UNAUTHORIZED, UNEXPECTED, classify)


@pytest.mark.parametrize('status, body', [
    (400, {'error': 'invalid_grant', 'error_description': 'Maximum allowed refresh token reuse exceeded'}),  # Keycloak
    (401, {'error': 'invalid_grant', 'error_description': 'Refresh token has been revoked'}),  # the write-up's gateway
])
def test_invalid_grant_is_a_stale_token_at_400_and_401(status, body):
    assert classify(status, body, None) == (STALE, 'invalid_grant', body['error_description'])


@pytest.mark.parametrize('status, error', [(401, 'invalid_client'), (400, 'invalid_client'),
                                           (401, 'unauthorized_client'), (400, 'unauthorized_client')])
def test_a_refused_client_is_unauthorized_whether_400_or_401(status, error):
    body = {'error': error, 'error_description': 'Invalid client or Invalid client credentials'}
    assert classify(status, body, None)[:2] == (UNAUTHORIZED, error)


def test_a_realm_keycloak_does_not_have_is_neither_stale_nor_unauthorized():
    assert classify(404, {'error': 'Realm does not exist'}, None)[:2] == (UNEXPECTED, 'Realm does not exist')


@pytest.mark.parametrize('status, body', [(400, {'error': 'invalid_request'}), (400, {}), (404, {'error': 'invalid_grant'})])
def test_a_status_without_the_code_is_not_a_stale_token(status, body):
    assert classify(status, body, None)[0] == UNEXPECTED

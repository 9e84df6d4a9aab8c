"""The lab's realm in a real Keycloak: refresh-token rotation on, the gateway's client and the runbook's
introspection client, configured through Keycloak's admin REST API.

- The realm revokes a refresh token when it is used (``revokeRefreshToken``) and allows no reuse
  (``refreshTokenMaxReuse`` 0): a refresh token restored from a snapshot is answered
  HTTP 400 ``invalid_grant`` "Maximum allowed refresh token reuse exceeded", and introspected
  ``{"active": false}``.
- ``svc-vllm`` is the gateway: a confidential client whose service account signs sessions in with
  client_credentials, each a Keycloak session of its own with a refresh token
  (``client_credentials.use_refresh_token``).
- ``vllm-dr`` is the runbook's introspection client: confidential, no flow of its own; Keycloak lets a
  confidential client of the realm introspect the realm's tokens, no role or scope needed.
"""

from __future__ import annotations

GATEWAY_CLIENT = ('svc-vllm', 'svc-vllm-lab-secret')
INTROSPECTION_CLIENT = ('vllm-dr', 'vllm-dr-lab-secret')
ACCESS_TOKEN_SECONDS = 3600


def realm_url(base_url: str, realm: str) -> str:
    return f'{base_url}/realms/{realm}'


def token_url(base_url: str, realm: str) -> str:
    return f'{realm_url(base_url, realm)}/protocol/openid-connect/token'


def introspection_url(base_url: str, realm: str) -> str:
    return f'{token_url(base_url, realm)}/introspect'


def _client(client_id: str, secret: str, **extra) -> dict:
    client = {'clientId': client_id, 'protocol': 'openid-connect', 'publicClient': False,
              'clientAuthenticatorType': 'client-secret', 'secret': secret, 'standardFlowEnabled': False,
              'implicitFlowEnabled': False, 'directAccessGrantsEnabled': False, 'serviceAccountsEnabled': False}
    client.update(extra)
    return client


def create_realm(api, realm: str) -> dict:
    """The lab's realm ``realm`` in the Keycloak ``api`` reaches (harness.keycloak.KeycloakApi); its endpoints."""
    api.admin_call('POST', '/realms', {
        'realm': realm, 'enabled': True, 'revokeRefreshToken': True, 'refreshTokenMaxReuse': 0,
        'accessTokenLifespan': ACCESS_TOKEN_SECONDS, 'ssoSessionIdleTimeout': 4 * ACCESS_TOKEN_SECONDS,
        'ssoSessionMaxLifespan': 24 * ACCESS_TOKEN_SECONDS,
    })
    api.admin_call('POST', f'/realms/{realm}/clients', _client(
        *GATEWAY_CLIENT, serviceAccountsEnabled=True, attributes={'client_credentials.use_refresh_token': 'true'}))
    api.admin_call('POST', f'/realms/{realm}/clients', _client(*INTROSPECTION_CLIENT))
    return {'realm': realm, 'token_url': token_url(api.url, realm),
            'introspection_url': introspection_url(api.url, realm)}


def delete_realm(api, realm: str) -> None:
    api.admin_call('DELETE', f'/realms/{realm}')

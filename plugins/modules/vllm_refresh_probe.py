#!/usr/bin/python

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_refresh_probe
short_description: Probe the vLLM token refresh path and tell a healthy one from a stale one
version_added: 0.1.0
description:
  - Calls the vLLM refresh endpoint (C(POST /api/v1/refresh_token) with a Bearer refresh token and a JSON body
    holding O(client_id)) and, optionally, C(/healthz), and classifies the answer. After a restore from a
    snapshot a stale token gives RV(classification=stale_token) (C(401 invalid_grant)).
  - The refresh token comes from O(refresh_token), or is read inside the module from the session O(session_id)
    in the session store, so it never passes through Ansible variables.
  - A successful refresh rotates the token. With O(session_id) the new tokens are written back into that
    session (compare-and-set on the old refresh token), so a probe never silently burns a real session. Use a
    dedicated probe session all the same, for example the service's own session.
  - Connection failures and 5xx answers are retried with backoff; a 4xx never is.
  - Once the provider has answered with a new refresh token, that token is written back before the rest of the
    answer is judged. An answer that is otherwise unusable (for example a non-numeric C(expires_in)) gives
    RV(classification=unexpected) with the reason in RV(error), and the session keeps working.
author:
  - inferops SRE (@inferops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.vllm_dr.session_store
  - inferops.vllm_dr.redis
  - inferops.vllm_dr.etcd
attributes:
  check_mode:
    support: full
    details: A refresh is a state change, so it is not made (RV(refresh_skipped)); the health check still runs.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  url:
    description:
      - The refresh endpoint, for example C(https://vllm.example.com/api/v1/refresh_token). Only C(http://) and
        C(https://) URLs are accepted.
    type: str
    required: true
  client_id:
    description:
      - Sent as the C(client_id) member of the JSON body of the refresh request.
    type: str
    default: svc-vllm
  refresh_token:
    description:
      - The refresh token to present. Mutually exclusive with O(session_id); prefer O(session_id).
    type: str
  session_id:
    description:
      - Read the refresh token from this session in the session store (O(backend) and the connection options).
    type: str
  write_back:
    description:
      - With O(session_id), store the rotated tokens back into the session. Defaults to V(true) with
        O(session_id); it cannot be used with O(refresh_token).
    type: bool
  health_url:
    description:
      - Also C(GET) this URL (for example C(/healthz)) and expect 200. Only C(http://) and C(https://) URLs are
        accepted.
    type: str
  timeout:
    description:
      - Seconds for each HTTP call (and for the session store). More than 0 and at most 86400.
    type: float
    default: 10.0
  retries:
    description:
      - Retries after a connection failure or a 5xx answer, with backoff (0.5 s, 1 s, 2 s, ...). 4xx answers are
        never retried (but see O(confirm_stale)).
    type: int
    default: 3
  confirm_stale:
    description:
      - Ask again, up to this many times with backoff (0.5 s, 1 s, 2 s, ...), after a V(stale_token) answer before
        reporting it, so that a provider's single transient C(invalid_grant) passes (RV(stale_answers)).
      - With O(session_id), the session's refresh token is read from the store again before each new try; when
        the service changed it meanwhile (it refreshed its own session while the probe ran, RV(raced)), the new
        token is presented.
      - V(0) takes the first answer, as before.
    type: int
    default: 0
  http_validate_certs:
    description:
      - Verify the TLS certificate and host name of the endpoints (O(url), O(health_url)). Turn off only for a
        lab. A Redis store over TLS has its own O(validate_certs).
    type: bool
    default: true
  http_ca_path:
    description:
      - CA bundle for the endpoints' certificates. The file must exist; a missing one is an error before anything
        is called, not a connection failure.
    type: path
  http_client_cert:
    description:
      - Client certificate for endpoints that require one (mutual TLS).
    type: path
  http_client_key:
    description:
      - Key of O(http_client_cert), when that file does not hold it. Requires O(http_client_cert).
    type: path
  headers:
    description:
      - Extra HTTP headers for both calls, for example an API key of the gateway. Values are strings on one line.
      - Their values are secrets to Ansible (C(no_log)) and never appear in results or logs.
    type: dict
  expect:
    description:
      - V(any) reports the classification and never fails on it.
      - V(healthy) fails, with the classification and the provider's error in one line, unless the refresh
        succeeds and the health check (when O(health_url) is given) answers 200. In check mode only the health
        check is judged.
    type: str
    choices: [any, healthy]
    default: any
notes:
  - Tokens never appear in results, messages or logs; session ids may. The tokens read from the session store and
    those the endpoint answers with are masked in everything the module returns, also when the endpoint or the
    provider echoes them in its error.
"""

EXAMPLES = r"""
- name: Does the refresh path work? (token read from the service's own session)
  inferops.vllm_dr.vllm_refresh_probe:
    url: https://vllm.example.com/api/v1/refresh_token
    health_url: https://vllm.example.com/healthz
    session_id: svc
    login_host: redis-service
  register: probe

- name: Fail the recovery unless refreshes work again
  inferops.vllm_dr.vllm_refresh_probe:
    url: https://vllm.example.com/api/v1/refresh_token
    health_url: https://vllm.example.com/healthz
    http_ca_path: /etc/ssl/internal-ca.pem
    session_id: svc
    login_host: redis-service
    expect: healthy
"""

RETURN = r"""
status:
  description: HTTP status of the refresh; V(null) when no answer came or the refresh was skipped.
  type: int
  returned: always
  sample: 401
classification:
  description: >-
    V(healthy), V(stale_token) (400/401 with C(invalid_grant)), V(unauthorized), V(server_error), V(unreachable),
    V(tls_error), V(unexpected), or V(skipped) in check mode.
  type: str
  returned: always
  sample: stale_token
error:
  description: The provider's C(error), or why no answer came.
  type: str
  returned: always
  sample: invalid_grant
error_description:
  description: The provider's C(error_description).
  type: str
  returned: always
  sample: Refresh token has been revoked
attempts:
  description: Refresh requests made.
  type: int
  returned: always
  sample: 1
elapsed_ms:
  description: Milliseconds spent on the refresh, retries included.
  type: int
  returned: always
  sample: 12
rotated:
  description: Whether the refresh returned a new refresh token.
  type: bool
  returned: always
  sample: true
written_back:
  description: V(written), V(already) (the service stored the same tokens), V(conflict) (the session changed meanwhile), or V(null).
  type: str
  returned: always
  sample: written
stale_answers:
  description: How many V(stale_token) answers the probe got (at most 1 + O(confirm_stale)).
  type: int
  returned: always
  sample: 0
raced:
  description: >-
    Whether the session's stored refresh token changed while the probe ran (the service refreshed its own
    session), so that the probe presented the new one.
  type: bool
  returned: always
  sample: false
health_status:
  description: HTTP status of O(health_url); V(null) without it or when no answer came.
  type: int
  returned: always
  sample: 200
refresh_skipped:
  description: V(true) in check mode, where no refresh is made. (Not C(skipped), which Ansible reserves.)
  type: bool
  returned: always
  sample: false
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.vllm_dr.plugins.module_utils._http_options import (
    HttpOptionError, check_file, check_headers, check_http_url, check_timeout)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._refresh_probe import (
    HEALTHY, UNEXPECTED, Http, answer_secrets, failure_message, health, read_rotation, settled_refresh)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import (
    SESSION_STORE_RULES, session_store_argument_spec)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.stores import open_store


def argument_spec() -> dict:
    spec = session_store_argument_spec()
    spec.update(
        url=dict(type='str', required=True),
        client_id=dict(type='str', default='svc-vllm'),
        refresh_token=dict(type='str', no_log=True),
        session_id=dict(type='str'),
        write_back=dict(type='bool'),
        health_url=dict(type='str'),
        retries=dict(type='int', default=3),
        confirm_stale=dict(type='int', default=0),
        http_validate_certs=dict(type='bool', default=True),
        http_ca_path=dict(type='path'),
        http_client_cert=dict(type='path'),
        http_client_key=dict(type='path'),
        headers=dict(type='dict', no_log=True),
        expect=dict(type='str', default='any', choices=['any', 'healthy']),
    )
    return spec


def hide(module: AnsibleModule, secrets) -> None:
    """Ansible masks these in every result, message and log line from now on."""
    for secret in secrets:
        text = secret.decode('utf-8', 'replace') if isinstance(secret, bytes) else secret
        if text:
            module.no_log_values.add(text)


def read_token(module: AnsibleModule):
    """(store, refresh token bytes) for session_id; the token stays inside the module and is masked at once."""
    params = module.params
    store = open_store(params)
    try:
        fields = store.get_session(params['session_id'])
    except StoreError:
        store.close()
        raise
    hide(module, [value for name, value in (fields or {}).items() if name.endswith(b'_token')])
    token = (fields or {}).get(b'refresh_token')
    if not token:
        store.close()
        what = 'does not exist' if fields is None else 'has no refresh_token'
        raise StoreError(f'session {params["session_id"]} {what}; give the id of a session the service keeps '
                         '(a dedicated probe session, or the service\'s own)')
    return store, token


def stored_token(module: AnsibleModule, store):
    """A reader of the probe session's refresh token as it is stored now (masked at once), or None without a store."""
    if store is None:
        return None

    def read():
        fields = store.get_session(module.params['session_id']) or {}
        hide(module, [value for name, value in fields.items() if name.endswith(b'_token')])
        return fields.get(b'refresh_token')
    return read


def checked_http(params: dict) -> Http:
    """The HTTP client, once every option it uses is known to be usable (nothing was called yet)."""
    check_http_url(params['url'], 'url')
    if params['health_url']:
        check_http_url(params['health_url'], 'health_url')
    if params['retries'] < 0:
        raise HttpOptionError('retries cannot be negative; give 0 to try once')
    if not 0 <= params['confirm_stale'] <= 10:
        raise HttpOptionError(f'confirm_stale {params["confirm_stale"]} is out of range; give 0 to 10 more tries')
    return Http(check_timeout(params['timeout']), params['http_validate_certs'],
                check_file(params['http_ca_path'], 'http_ca_path', 'the CA bundle that signed the endpoint\'s certificate'),
                check_file(params['http_client_cert'], 'http_client_cert', 'the client certificate'),
                check_file(params['http_client_key'], 'http_client_key', 'the key of http_client_cert'),
                check_headers(params['headers']))


def store_rotation(store, session_id: str, presented: bytes, fields: dict) -> str:
    try:
        return store.swap_tokens(session_id, presented, fields)
    except StoreError as exc:
        raise StoreError(f'the provider rotated the refresh token of session {session_id}, but storing the new one '
                         f'failed ({exc}); the session now holds a revoked token: sign it in again') from None


def run(module: AnsibleModule) -> dict:
    params = module.params
    if params['write_back'] and not params['session_id']:
        raise StoreError('write_back needs session_id: without a session there is nowhere to store the rotated token')
    http = checked_http(params)
    result = {'status': None, 'classification': 'skipped', 'error': None, 'error_description': None, 'attempts': 0,
              'elapsed_ms': 0, 'rotated': False, 'written_back': None, 'health_status': None, 'stale_answers': 0,
              'raced': False,
              'refresh_skipped': module.check_mode}
    store = None
    try:
        if params['session_id']:
            store, token = read_token(module)
        else:
            token = (params['refresh_token'] or '').encode()
            if not token:
                raise StoreError('give session_id (preferred) or refresh_token')
        if not module.check_mode:
            outcome, answer, token = settled_refresh(http, params['url'], params['client_id'], token, params['retries'],
                                                     params['confirm_stale'], stored_token(module, store))
            result.update(outcome)
            if answer is not None:
                hide(module, answer_secrets(answer))
                # the provider has rotated: the new token is stored before the rest of the answer is judged
                fields, problem = read_rotation(answer, token)
                result['rotated'] = bool(fields)
                if store is not None and fields and params['write_back'] is not False:
                    result['written_back'] = store_rotation(store, params['session_id'], token, fields)
                if problem:
                    result.update(classification=UNEXPECTED, error=problem)
    finally:
        if store is not None:
            store.close()
    if params['health_url']:
        result['health_status'], health_error = health(http, params['health_url'])
        if health_error and not result['error']:
            result['error'] = health_error
    result['changed'] = result['rotated']
    return result


def healthy_enough(result: dict, check_mode: bool, wants_health: bool) -> bool:
    health_ok = not wants_health or result['health_status'] == 200
    return health_ok and (check_mode or result['classification'] == HEALTHY)


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        mutually_exclusive=[('refresh_token', 'session_id')],
        required_one_of=[('refresh_token', 'session_id')],
        supports_check_mode=True,
        required_if=SESSION_STORE_RULES['required_if'],
        required_by=dict(SESSION_STORE_RULES['required_by'], http_client_key='http_client_cert'),
    )
    try:
        result = run(module)
    except (StoreError, HttpOptionError) as exc:
        module.fail_json(msg=str(exc))
    wants_health = bool(module.params['health_url'])
    if module.params['expect'] == 'healthy' and not healthy_enough(result, module.check_mode, wants_health):
        module.fail_json(msg=failure_message(result), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()

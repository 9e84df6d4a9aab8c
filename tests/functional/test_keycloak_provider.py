"""The incident against a real Keycloak: the lab's gateway refreshes at a Keycloak realm with refresh-token rotation.

One Keycloak for the test session (``keycloak`` fixture, a minute or two to start), a realm per test. The
gateway answers a refused refresh with Keycloak's own status and error, so what the probe and the runbook
judge here is what Keycloak says: HTTP 400 ``invalid_grant`` for a rotated refresh token (not the write-up's
401), 401 ``invalid_client`` / ``unauthorized_client`` for a client it does not know or whose secret is wrong,
404 for a realm it does not have; its introspection answers ``{"active": false}`` for a rotated refresh token.
"""

from __future__ import annotations

import json

import pytest
import redis
import yaml

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_refresh_probe
from harness.lab_runs import keycloak_lab
from harness.modules import run_module
from harness.playbooks import playbook, recap
from harness.reports import report_path
from harness.sessions import PREFIX

pytestmark = pytest.mark.slow


@pytest.fixture
def kc_lab(tmp_path, keycloak):
    with keycloak_lab(tmp_path, keycloak) as lab:
        yield lab


def probe(capsys, lab, **extra):
    args = dict(url=f'{lab.gateway_url}/api/v1/refresh_token', health_url=f'{lab.gateway_url}/healthz',
                session_id='probe', login_host='127.0.0.1', login_port=lab.state['ports']['redis'])
    args.update(extra)
    return run_module(vllm_refresh_probe, args, capsys)


def reconfigure(lab, **oauth) -> None:
    """The gateway restarted with other provider settings (its sessions stay as they are)."""
    with open(lab.config_path, encoding='utf-8') as handle:
        config = yaml.safe_load(handle)
    config['oauth'].update(oauth)
    with open(lab.config_path, 'w', encoding='utf-8') as handle:
        yaml.safe_dump(config, handle, sort_keys=False)
    lab.restart()


def session_ids(lab) -> set:
    client = redis.Redis(host='127.0.0.1', port=lab.state['ports']['redis'], socket_timeout=5)
    return {key.decode()[len(PREFIX):] for key in client.scan_iter(match=PREFIX + '*')}


def test_drill_against_keycloak_sweeps_exactly_the_rotated_sessions_and_validates_with_a_real_refresh(kc_lab, tmp_path):
    lab = kc_lab
    lab.snapshot()
    # s2 is not refreshed between the snapshot and the restore: its restored token is still Keycloak's current one
    rotated = lab.rotate(keep=('s2',))['rotated']
    assert sorted(rotated) == ['probe', 's0', 's1', 'svc']
    lab.restore()
    status, body = lab.refresh('s0')
    assert (status, body['error']) == (400, 'invalid_grant'), body
    assert body['error_description'] == 'Maximum allowed refresh token reuse exceeded'
    lab.inventory_path = str(tmp_path / 'inventory.yml')
    with open(lab.inventory_path, 'w', encoding='utf-8') as handle:
        yaml.safe_dump(lab.inventory(str(tmp_path / 'reports')), handle)

    rc, output = playbook(lab.inventory_path)
    assert rc == 0, output[-3000:]
    assert recap(output)['failed'] == 0
    report = json.loads(report_path(tmp_path / 'reports', 'lab.json').read_text())
    assert report['diagnosis']['recovery_needed'] is True
    assert (report['diagnosis']['probe']['classification'], report['diagnosis']['probe']['status']) == ('stale_token', 400)
    assert report['passed'] is True and all(check['ok'] for check in report['validation']['checks'])
    # select: revoked asked Keycloak about every session: the rotated ones went, the one Keycloak still honours
    # stayed; the restarted gateway signed its service session in again
    assert session_ids(lab) == {'s2', 'svc'}
    assert lab.refresh('s2')[0] == 200 and lab.refresh('svc')[0] == 200
    assert 'lab-secret' not in output and lab.session('svc')['refresh_token'] not in output


def test_keycloak_400_invalid_grant_is_a_stale_token(capsys, kc_lab):
    kc_lab.snapshot()
    kc_lab.rotate()
    kc_lab.restore()
    result = probe(capsys, kc_lab)
    assert (result['classification'], result['status'], result['error']) == ('stale_token', 400, 'invalid_grant')
    assert result['error_description'] == 'Maximum allowed refresh token reuse exceeded'


def test_keycloak_healthy_refresh_rotates_the_stored_token(capsys, kc_lab):
    before = kc_lab.session('probe')['refresh_token']
    result = probe(capsys, kc_lab, expect='healthy')
    assert result['_rc'] == 0 and (result['classification'], result['status']) == ('healthy', 200), result.get('msg')
    assert result['rotated'] is True and kc_lab.session('probe')['refresh_token'] != before


def test_keycloak_invalid_client_is_not_a_stale_token(capsys, kc_lab):
    reconfigure(kc_lab, client_id='no-such-client')
    result = probe(capsys, kc_lab)
    assert (result['classification'], result['status'], result['error']) == ('unauthorized', 401, 'invalid_client')


def test_keycloak_wrong_client_secret_is_not_a_stale_token(capsys, kc_lab):
    reconfigure(kc_lab, client_secret='not-the-gateway-secret')
    result = probe(capsys, kc_lab)
    assert (result['classification'], result['status'], result['error']) == ('unauthorized', 401, 'unauthorized_client')
    assert 'not-the-gateway-secret' not in json.dumps(result)


def test_keycloak_realm_that_does_not_exist_is_not_a_stale_token(capsys, kc_lab):
    reconfigure(kc_lab, token_url=kc_lab.token_url.replace(f'/realms/{kc_lab.keycloak["realm"]}/', '/realms/no-such-realm/'))
    result = probe(capsys, kc_lab)
    assert (result['classification'], result['status'], result['error']) == ('unexpected', 404, 'Realm does not exist')

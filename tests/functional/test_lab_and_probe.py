"""The incident lab reproduces the failure for real, and vllm_refresh_probe tells healthy from stale."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_refresh_probe
from harness.modules import run_module
from harness.servers import free_port
from lab.labctl import Lab

LOG_LINE = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (ERROR|WARN|INFO) ')


@pytest.fixture
def lab(tmp_path):
    lab = Lab(str(tmp_path / 'lab'))
    started = time.monotonic()
    lab.up(sessions=3)
    lab.started_in = time.monotonic() - started
    try:
        yield lab
    finally:
        lab.down()


def incident(lab):
    lab.snapshot()
    lab.rotate()
    lab.restore()


def probe_args(lab, **extra):
    args = dict(url=f'{lab.gateway_url}/api/v1/refresh_token', health_url=f'{lab.gateway_url}/healthz',
                session_id='probe', login_host='127.0.0.1', login_port=lab.state['ports']['redis'])
    args.update(extra)
    return args


def log_lines(lab):
    with open(lab.log_path, encoding='utf-8') as handle:
        return handle.read().splitlines()


def test_fresh_lab_refreshes_and_a_restored_snapshot_fails_as_the_write_up_says(lab):
    assert lab.refresh('s0')[0] == 200
    incident(lab)
    status, body = lab.refresh('s0')
    assert status == 401
    assert body == {'error': 'invalid_grant', 'error_description': 'Refresh token has been revoked'}
    lines = log_lines(lab)
    assert 'ERROR TokenRefreshError: token expired for session s0' in '\n'.join(lines)
    assert 'WARN Invalid token in session state (session_id=s0)' in '\n'.join(lines)
    assert 'ERROR Failed to refresh token: authentication failed (client_id=svc-vllm)' in '\n'.join(lines)
    assert all(LOG_LINE.match(line) for line in lines)
    assert os.path.getmtime(lab.cache_path) < time.time() - 0.5 or lab.state['snapshot_at'] < lab.state['up_at'] + 60


def test_restored_cache_keeps_its_snapshot_mtime(lab):
    lab.snapshot()
    snapshot_mtime = os.path.getmtime(lab.path('snapshot', 'token_cache.db'))
    lab.rotate()
    assert os.path.getmtime(lab.cache_path) > snapshot_mtime
    lab.restore()
    assert os.path.getmtime(lab.cache_path) == snapshot_mtime


def test_probe_of_a_healthy_session_is_healthy_and_the_stored_tokens_move_on(capsys, lab):
    before = lab.session('probe')
    result = run_module(vllm_refresh_probe, probe_args(lab, expect='healthy'), capsys)
    assert result['_rc'] == 0, result.get('msg')
    assert result['classification'] == 'healthy' and result['status'] == 200 and result['health_status'] == 200
    assert result['rotated'] is True and result['changed'] is True and result['attempts'] == 1
    assert result['written_back'] in ('written', 'already')
    assert lab.session('probe')['refresh_token'] != before['refresh_token']
    assert lab.refresh('probe')[0] == 200, 'the probe must not burn the session'
    assert lab.started_in < 10


def test_the_same_probe_after_the_incident_is_stale(capsys, lab):
    incident(lab)
    result = run_module(vllm_refresh_probe, probe_args(lab), capsys)
    assert result['_rc'] == 0
    assert (result['classification'], result['status'], result['error']) == ('stale_token', 401, 'invalid_grant')
    assert result['error_description'] == 'Refresh token has been revoked'
    assert result['attempts'] == 1, '4xx is never retried'
    assert result['health_status'] == 200


def test_expect_healthy_fails_with_one_line_naming_the_cause(capsys, lab):
    incident(lab)
    result = run_module(vllm_refresh_probe, probe_args(lab, expect='healthy'), capsys)
    assert result['failed'] is True and '\n' not in result['msg']
    assert result['msg'].startswith('refresh probe: stale_token, HTTP 401, invalid_grant: Refresh token has been revoked; ')
    assert 'purge the token cache' in result['msg']


def test_endpoint_down_is_unreachable_after_the_retries(capsys, lab):
    args = probe_args(lab, url=f'http://127.0.0.1:{free_port()}/api/v1/refresh_token', retries=2, health_url=None)
    result = run_module(vllm_refresh_probe, args, capsys)
    assert result['classification'] == 'unreachable' and result['attempts'] == 3 and result['status'] is None
    assert 'Connection refused' in result['error']


def test_provider_down_is_a_server_error_after_the_retries(capsys, lab):
    lab._stop('idp')  # pylint: disable=protected-access
    result = run_module(vllm_refresh_probe, probe_args(lab, retries=1), capsys)
    assert result['classification'] == 'server_error' and result['status'] == 503 and result['attempts'] == 2


def test_check_mode_refreshes_nothing(capsys, lab):
    before = lab.session('probe')
    result = run_module(vllm_refresh_probe, probe_args(lab, expect='healthy'), capsys, check_mode=True)
    assert result['_rc'] == 0 and result['refresh_skipped'] is True and result['classification'] == 'skipped'
    assert result['attempts'] == 0 and result['health_status'] == 200 and result['changed'] is False
    assert lab.session('probe') == before


def test_missing_session_fails_with_one_line(capsys, lab):
    result = run_module(vllm_refresh_probe, probe_args(lab, session_id='nobody'), capsys)
    assert result['failed'] is True and result['msg'].startswith('session nobody does not exist; give the id')


def test_write_back_compares_and_sets(capsys, redis_server):
    from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import session_store_argument_spec
    from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.stores import open_store

    params = {name: spec.get('default') for name, spec in session_store_argument_spec().items()}
    params.update(login_host='127.0.0.1', login_port=redis_server.port)
    redis_server.client().hset('vllm:session:p', mapping={'refresh_token': 'old', 'access_token': 'a'})
    store = open_store(params)
    try:
        new = {b'refresh_token': b'new', b'access_token': b'b', b'expires_at': b'2999-01-01T00:00:00Z'}
        assert store.swap_tokens('p', b'old', new) == 'written'
        assert store.swap_tokens('p', b'old', new) == 'already'
        assert store.swap_tokens('p', b'old', {**new, b'refresh_token': b'newer'}) == 'conflict'
    finally:
        store.close()
    assert redis_server.client().hget('vllm:session:p', 'refresh_token') == b'new'


@pytest.fixture
def tls_lab(tmp_path):
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=1, tls=True)
    try:
        yield lab
    finally:
        lab.down()


def test_self_signed_tls_needs_ca_path(capsys, tls_lab):
    without = run_module(vllm_refresh_probe, probe_args(tls_lab, health_url=None), capsys)
    assert without['classification'] == 'tls_error' and without['attempts'] == 1
    assert 'CERTIFICATE_VERIFY_FAILED' in without['error'] or 'certificate' in without['error'].lower()
    with_ca = run_module(vllm_refresh_probe, probe_args(tls_lab, http_ca_path=tls_lab.state['tls_files']['ca']), capsys)
    assert with_ca['classification'] == 'healthy' and with_ca['health_status'] == 200


def test_vvv_output_holds_no_token(lab):
    tokens_before = {value for sid in lab.state['sessions'] + ['svc'] for name, value in lab.session(sid).items()
                     if name.endswith('_token')}
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0')
    args = ' '.join(f'{k}={v}' for k, v in probe_args(lab).items())
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible'), 'localhost', '-vvv',
                          '-m', 'inferops.vllm_dr.vllm_refresh_probe', '-a', args],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-2000:]
    assert '"classification": "healthy"' in text
    tokens_after = {value for sid in lab.state['sessions'] + ['svc'] for name, value in lab.session(sid).items()
                    if name.endswith('_token')}
    leaked = [token for token in tokens_before | tokens_after if token in text]
    assert leaked == []
    given = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible'), 'localhost', '-vvv', '-m',
                            'inferops.vllm_dr.vllm_refresh_probe', '-a',
                            f'url={lab.gateway_url}/api/v1/refresh_token refresh_token={lab.session("s0")["refresh_token"]}'],
                           capture_output=True, text=True, env=env, timeout=120, check=False)
    assert lab.session('s0')['refresh_token'] not in given.stdout + given.stderr
    assert json.dumps('healthy') in given.stdout

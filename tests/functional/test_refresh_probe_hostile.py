"""vllm_refresh_probe against endpoints that echo tokens or answer badly, and options that cannot work.

The endpoint is a real HTTP server on loopback (http.server in a thread); the session store a real redis-server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_refresh_probe, vllm_session_sweep
from harness.modules import run_module
from harness.secret_scan import find_leaks

STORED_REFRESH = 'stored-refresh-6c1d0e2f9a8b7c6d'
STORED_ACCESS = 'stored-access-0a9b8c7d6e5f4a3b'
NEW_REFRESH = 'rotated-refresh-3e4f5a6b7c8d9e0f'
NEW_ACCESS = 'rotated-access-1f2e3d4c5b6a7980'
API_KEY = 'gateway-api-key-5d4c3b2a1f0e'


class Endpoint:
    """A refresh endpoint on loopback that answers what the test says, given the request it got."""

    def __init__(self):
        self.requests = []
        self.answer = lambda request: (200, {'status': 'ok'})
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                length = int(self.headers.get('Content-Length') or 0)
                request = {'method': self.command, 'path': self.path, 'headers': dict(self.headers),
                           'body': self.rfile.read(length).decode()}
                endpoint.requests.append(request)
                status, body = endpoint.answer(request)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _serve

            def log_message(self, *args):  # pylint: disable=arguments-differ
                pass

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = f'http://127.0.0.1:{self.server.server_address[1]}'
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def refreshes(self):
        return [request for request in self.requests if request['method'] == 'POST']


@pytest.fixture
def endpoint():
    server = Endpoint()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


@pytest.fixture
def session(redis_server):
    """The probe session in a real Redis."""
    redis_server.client().hset('vllm:session:p', mapping={'refresh_token': STORED_REFRESH, 'access_token': STORED_ACCESS,
                                                          'expires_at': '2020-01-01T00:00:00Z'})
    return redis_server


def stored(redis_server) -> dict:
    return {k.decode(): v.decode() for k, v in redis_server.client().hgetall('vllm:session:p').items()}


def probe_args(endpoint, redis_server, **extra):
    args = dict(url=f'{endpoint.url}/api/v1/refresh_token', session_id='p', login_host='127.0.0.1',
                login_port=redis_server.port, retries=0)
    args.update(extra)
    return args


def echo(request):
    """A careless gateway: its error repeats what it was given."""
    return 401, {'error': 'invalid_grant',
                 'error_description': f'revoked: {request["headers"].get("Authorization")} '
                                      f'key={request["headers"].get("X-Api-Key")} body={request["body"]}'}


SECRETS = {STORED_REFRESH, STORED_ACCESS, NEW_REFRESH, NEW_ACCESS, API_KEY}


# ---- item 10: nothing the endpoint echoes gets out ---------------------------------------------------------------


def test_echoed_stored_token_and_api_key_are_masked_in_result_and_msg(capsys, endpoint, session):
    endpoint.answer = echo
    result = run_module(vllm_refresh_probe, probe_args(endpoint, session, expect='healthy',
                                                       headers={'X-Api-Key': API_KEY}), capsys)
    assert result['failed'] is True and result['classification'] == 'stale_token'
    assert endpoint.requests[0]['headers']['Authorization'] == f'Bearer {STORED_REFRESH}', 'the endpoint did get it'
    assert find_leaks(SECRETS, {'result': json.dumps(result)}) == []
    assert 'revoked: Bearer ******** key=********' in result['msg']


def test_tokens_of_a_rotating_answer_are_masked_when_it_echoes_them(capsys, endpoint, session):
    endpoint.answer = lambda request: (200, {'refresh_token': NEW_REFRESH, 'access_token': NEW_ACCESS,
                                             'expires_in': f'{NEW_ACCESS} or {STORED_REFRESH}'})
    result = run_module(vllm_refresh_probe, probe_args(endpoint, session), capsys)
    assert result['classification'] == 'unexpected' and result['rotated'] is True
    assert find_leaks(SECRETS, {'result': json.dumps(result)}) == []


def test_vvv_output_of_an_echoing_endpoint_holds_no_token_nor_header(endpoint, session, tmp_path):
    endpoint.answer = echo
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0',
               ANSIBLE_LOG_PATH=str(tmp_path / 'ansible.log'))
    args = probe_args(endpoint, session, headers={'X-Api-Key': API_KEY}, health_url=f'{endpoint.url}/healthz')
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible'), 'localhost', '-vvv',
                          '-m', 'inferops.vllm_dr.vllm_refresh_probe', '-a', json.dumps(args)],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert out.returncode == 0, (out.stdout + out.stderr)[-2000:]
    assert '"classification": "stale_token"' in out.stdout
    assert [request['headers']['X-Api-Key'] for request in endpoint.requests] == [API_KEY, API_KEY]
    assert find_leaks(SECRETS, {'stdout': out.stdout, 'stderr': out.stderr}, [str(tmp_path / 'ansible.log')]) == []


# ---- item 11: a rotated token is stored before the answer is judged ----------------------------------------------


@pytest.mark.parametrize('expires_in', ['soon', 1e300, 10 ** 30, -1, 0, True, [3600]])
def test_unusable_expiry_after_rotation_keeps_the_new_token_in_the_store(capsys, endpoint, session, expires_in):
    endpoint.answer = lambda request: (200, {'refresh_token': NEW_REFRESH, 'access_token': NEW_ACCESS,
                                             'expires_in': expires_in})
    result = run_module(vllm_refresh_probe, probe_args(endpoint, session), capsys)
    assert result['_rc'] == 0, result.get('msg')
    assert (result['classification'], result['rotated'], result['written_back']) == ('unexpected', True, 'written')
    assert result['error'].startswith("the refresh answer's expires_in is not a number of seconds")
    assert '\n' not in result['error']
    assert stored(session) == {'refresh_token': NEW_REFRESH, 'access_token': NEW_ACCESS,
                               'expires_at': '2020-01-01T00:00:00Z'}


def test_session_still_refreshes_after_an_answer_with_an_unusable_expiry(capsys, endpoint, session):
    endpoint.answer = lambda request: (200, {'refresh_token': NEW_REFRESH, 'expires_in': 'soon'})
    result = run_module(vllm_refresh_probe, probe_args(endpoint, session, expect='healthy'), capsys)
    assert result['failed'] is True and '\n' not in result['msg']
    assert result['msg'].startswith("refresh probe: unexpected, HTTP 200, the refresh answer's expires_in")

    def rotate_again(request):
        if request['headers'].get('Authorization') != f'Bearer {NEW_REFRESH}':
            return 401, {'error': 'invalid_grant'}
        return 200, {'refresh_token': 'rotated-twice-7a6b5c4d3e2f1a0b', 'access_token': NEW_ACCESS, 'expires_in': '120'}
    endpoint.answer = rotate_again
    before = time.time()
    result = run_module(vllm_refresh_probe, probe_args(endpoint, session, expect='healthy'), capsys)
    assert result['_rc'] == 0 and result['classification'] == 'healthy' and result['written_back'] == 'written'
    assert stored(session)['refresh_token'] == 'rotated-twice-7a6b5c4d3e2f1a0b'
    expires_at = time.mktime(time.strptime(stored(session)['expires_at'], '%Y-%m-%dT%H:%M:%SZ')) - time.timezone
    assert before + 118 <= expires_at <= time.time() + 121


@pytest.mark.parametrize('refresh_token', [12345, {'token': NEW_REFRESH}, [NEW_REFRESH]])
def test_non_string_refresh_token_is_unexpected_and_nothing_is_stored(capsys, endpoint, session, refresh_token):
    endpoint.answer = lambda request: (200, {'refresh_token': refresh_token, 'access_token': NEW_ACCESS, 'expires_in': 60})
    before = stored(session)
    result = run_module(vllm_refresh_probe, probe_args(endpoint, session), capsys)
    assert result['_rc'] == 0, result.get('msg')
    assert (result['classification'], result['rotated'], result['written_back']) == ('unexpected', False, None)
    assert result['error'] == f"the refresh answer's refresh_token is a {type(refresh_token).__name__}, not a string; check url"
    assert stored(session) == before


# ---- item 9: options that cannot work are one line, before anything is called --------------------------------------


def assert_refused_untouched(result, endpoint, session, before, starts):
    assert result['failed'] is True and '\n' not in result['msg'], result.get('msg')
    assert result['msg'].startswith(starts), result['msg']
    assert endpoint.requests == [] and stored(session) == before


@pytest.mark.parametrize('option, value, starts', [
    ('url', 'file:///etc/hostname', 'url must be an http:// or https:// URL, not file://'),
    ('url', 'ftp://127.0.0.1/refresh', 'url must be an http:// or https:// URL, not ftp://'),
    ('url', 'http:///refresh', 'url has no host'),
    ('health_url', 'file:///etc/hostname', 'health_url must be an http:// or https:// URL, not file://'),
])
def test_non_http_url_is_refused_in_one_line(capsys, endpoint, session, option, value, starts):
    before = stored(session)
    args = probe_args(endpoint, session, health_url=f'{endpoint.url}/healthz')
    args[option] = value
    assert_refused_untouched(run_module(vllm_refresh_probe, args, capsys), endpoint, session, before, starts)


def test_missing_ca_path_is_refused_at_once_naming_the_file(capsys, endpoint, session, tmp_path):
    before = stored(session)
    missing = str(tmp_path / 'no-such-ca.pem')
    started = time.monotonic()
    result = run_module(vllm_refresh_probe, probe_args(endpoint, session, http_ca_path=missing, retries=3), capsys)
    assert_refused_untouched(result, endpoint, session, before, f'http_ca_path {missing} does not exist or is not a file')
    assert time.monotonic() - started < 1.0, 'no retries'


@pytest.mark.parametrize('timeout', [0, -1, 'inf', 'nan'])
def test_unusable_timeout_is_refused_in_one_line(capsys, endpoint, session, timeout):
    before = stored(session)
    result = run_module(vllm_refresh_probe, probe_args(endpoint, session, timeout=timeout), capsys)
    assert_refused_untouched(result, endpoint, session, before, 'timeout ')
    assert 'is out of range; give seconds more than 0' in result['msg']


def test_header_with_a_line_break_is_refused_without_its_value(capsys, endpoint, session):
    before = stored(session)
    result = run_module(vllm_refresh_probe, probe_args(endpoint, session, headers={'X-Api-Key': f'{API_KEY}\nX: y'}),
                        capsys)
    assert_refused_untouched(result, endpoint, session, before, "headers: 'X-Api-Key' holds a line break")
    assert API_KEY not in json.dumps(result)


@pytest.mark.parametrize('extra, starts', [
    ({'introspection_url': 'file:///etc/hostname'}, 'introspection_url must be an http:// or https:// URL, not file://'),
    ({'introspection_ca_path': '/nonexistent/ca.pem'}, 'introspection_ca_path /nonexistent/ca.pem does not exist'),
])
def test_sweep_refuses_unusable_introspection_options_in_one_line(capsys, endpoint, session, extra, starts):
    args = dict(state='reported', select='revoked', introspection_url=f'{endpoint.url}/oauth/introspect',
                introspection_client_id='vllm-dr', introspection_client_secret='s3cret-s3cret',
                login_host='127.0.0.1', login_port=session.port)
    args.update(extra)
    result = run_module(vllm_session_sweep, args, capsys)
    assert result['failed'] is True and '\n' not in result['msg'] and result['msg'].startswith(starts), result['msg']
    assert endpoint.requests == []

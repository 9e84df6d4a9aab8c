"""etcd over TLS with a client certificate, through the etcd_ options, and each missing piece named in one line.

A real etcd serving https with ``--client-cert-auth`` and a private CA (openssl); nothing is swept when a
certificate option is missing or wrong.
"""

from __future__ import annotations

import base64
import json

import pytest

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_refresh_probe, vllm_session_sweep
from harness.modules import run_module
from harness.servers import EtcdServer, TlsFiles
from harness.sessions import ETCD_PREFIX, iso, session


@pytest.fixture(scope='module')
def tls_files(tmp_path_factory):
    return TlsFiles(str(tmp_path_factory.mktemp('etcd-tls-files')))


@pytest.fixture(scope='module')
def etcd_tls(tmp_path_factory, tls_files):
    with EtcdServer(workdir=str(tmp_path_factory.mktemp('etcd-tls')), tls=tls_files, tls_client_certs=True) as server:
        yield server


@pytest.fixture
def sessions(etcd_tls):
    for sid in ('e0', 'e1'):
        etcd_tls.put(ETCD_PREFIX + sid, json.dumps(session(sid, iso(1e9))))
    etcd_tls.put(ETCD_PREFIX + 'v0', json.dumps(session('v0', iso(4e9))))
    yield etcd_tls.keys(ETCD_PREFIX)
    for key in etcd_tls.keys(ETCD_PREFIX):
        etcd_tls.call('/kv/deleterange', {'key': base64.b64encode(key.encode()).decode()})


def sweep(capsys, server, **extra):
    args = {'backend': 'etcd', 'etcd_endpoints': [server.url], 'timeout': 3, 'state': 'swept', 'backup': False}
    args.update(extra)
    return run_module(vllm_session_sweep, args, capsys)


def certificates(tls_files, **changes):
    options = {'etcd_ca_cert': tls_files.ca_cert, 'etcd_client_cert': tls_files.client_cert,
               'etcd_client_key': tls_files.client_key}
    options.update(changes)
    return {name: value for name, value in options.items() if value is not None}


def one_line(result, *parts):
    assert result['failed'] is True, result
    assert '\n' not in result['msg'] and 'Traceback' not in json.dumps(result), result
    for part in parts:
        assert part in result['msg'], result['msg']


def test_sweep_over_tls_with_the_etcd_certificate_options(capsys, etcd_tls, tls_files, sessions):
    result = sweep(capsys, etcd_tls, **certificates(tls_files))
    assert result.get('failed') is not True, result
    assert result['deleted'] == 2
    assert sorted(etcd_tls.keys(ETCD_PREFIX)) == [ETCD_PREFIX + 'v0']


def test_untrusted_server_names_etcd_ca_cert(capsys, etcd_tls, tls_files, sessions):
    result = sweep(capsys, etcd_tls, **certificates(tls_files, etcd_ca_cert=None))
    one_line(result, 'local issuer certificate', 'etcd_ca_cert')
    assert etcd_tls.keys(ETCD_PREFIX) == sessions


def test_missing_client_certificate_names_the_etcd_client_options(capsys, etcd_tls, tls_files, sessions):
    result = sweep(capsys, etcd_tls, **certificates(tls_files, etcd_client_cert=None, etcd_client_key=None))
    one_line(result, 'etcd_client_cert')
    assert etcd_tls.keys(ETCD_PREFIX) == sessions


def test_the_old_etcd_names_are_refused_before_anything_is_touched(capsys, etcd_tls, tls_files, sessions):
    result = sweep(capsys, etcd_tls, ca_cert=tls_files.ca_cert, client_cert=tls_files.client_cert,
                   client_key=tls_files.client_key)
    one_line(result, 'Unsupported parameters', 'ca_cert', 'client_cert', 'client_key')
    assert etcd_tls.keys(ETCD_PREFIX) == sessions


def test_etcd_client_key_alone_is_refused(capsys, etcd_tls, tls_files, sessions):
    result = sweep(capsys, etcd_tls, etcd_ca_cert=tls_files.ca_cert, etcd_client_key=tls_files.client_key)
    one_line(result, 'etcd_client_key', 'etcd_client_cert')
    assert etcd_tls.keys(ETCD_PREFIX) == sessions


def test_probe_http_tls_options_are_its_own(capsys, tls_files):
    """The probe's endpoint certificate options no longer borrow the store's: the old names are refused, and
    http_client_key needs http_client_cert."""
    base = {'url': 'https://127.0.0.1:9/refresh', 'refresh_token': 'x', 'retries': 0, 'timeout': 1}
    old = run_module(vllm_refresh_probe, dict(base, ca_path=tls_files.ca_cert), capsys)
    one_line(old, 'Unsupported parameters', 'ca_path')
    alone = run_module(vllm_refresh_probe, dict(base, http_client_key=tls_files.client_key), capsys)
    one_line(alone, 'http_client_key', 'http_client_cert')

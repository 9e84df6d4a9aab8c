"""The session-store package keeps the old import paths of the connection set-up and the store error working."""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils import _session_errors, _session_store
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import backup, connection, errors, model, sweep


def test_session_store_path_gives_the_package_connection_setup():
    for name in ('BACKENDS', 'MAX_TIMEOUT', 'SESSION_STORE_RULES', 'check_store_params', 'open_store',
                 'parse_etcd_endpoint', 'parse_sentinel_hosts', 'session_store_argument_spec'):
        assert getattr(_session_store, name) is getattr(connection, name), name


def test_session_errors_path_gives_the_package_store_error():
    for name in ('StoreError', 'exception_chain', 'server_words'):
        assert getattr(_session_errors, name) is getattr(errors, name), name


def test_sweep_and_backup_share_the_one_entry_model():
    assert backup.Entry is model.Entry
    assert sweep.SweepJob.__module__.endswith('_sessions.sweep')
    assert model.Entry.__module__.endswith('_sessions.model')

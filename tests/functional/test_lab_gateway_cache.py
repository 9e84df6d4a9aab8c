"""The lab gateway opens its token cache for each request: a cache moved aside while it runs (a purge, or a rollback
putting a backup in place, before the restart; a forced run probing while another run purges) is rebuilt as vLLM
rebuilds a missing cache, never opened as a new file with no table and answered HTTP 500 'no such table: tokens'."""

from __future__ import annotations

import logging
import os
import sqlite3

from lab.gateway import TokenCache


def test_a_cache_moved_aside_under_the_running_gateway_is_rebuilt_not_a_500(tmp_path, caplog):
    path = str(tmp_path / 'token_cache.db')
    cache = TokenCache(path, 10, logging.getLogger('lab-gateway-test'))
    cache.put('s1', 'access', 'refresh-1', 2e9)
    os.rename(path, path + '.bak')  # what the purge does on the volume, the gateway still running

    with caplog.at_level(logging.WARNING, logger='lab-gateway-test'):
        assert cache.session_for('refresh-1') is None  # no OperationalError: the cache is rebuilt, empty
    assert 'Token cache not found or corrupted' in caplog.text
    cache.put('s2', 'access', 'refresh-2', 2e9)
    assert cache.session_for('refresh-2') == 's2'
    assert cache.usable()
    # the backup moved aside was not touched
    with sqlite3.connect(path + '.bak') as backup:
        assert backup.execute('SELECT session_id FROM tokens').fetchall() == [('s1',)]


def test_an_empty_file_left_at_the_cache_path_is_rebuilt_too(tmp_path):
    path = tmp_path / 'token_cache.db'
    cache = TokenCache(str(path), 10, logging.getLogger('lab-gateway-test'))
    path.write_bytes(b'')
    assert cache.get('s1') is None

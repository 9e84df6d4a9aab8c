"""dr_rollback.yml on the incident lab puts the token cache rows the run removed back into the cache as it is now:
sessions signed in after the run keep refreshing. A cache that cannot be merged is refused in one line naming the
rows that replacing it would lose, before anything changes; vllm_dr_rollback_replace_cache=true replaces it."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_token_cache
from harness.lab_runs import incident_lab, write_inventory
from harness.modules import run_module
from harness.playbooks import playbook
from harness.reports import report_path


def rows(path):
    conn = sqlite3.connect(f'file:{path}?mode=ro', uri=True)
    try:
        return {row[0]: row[1:] for row in conn.execute('SELECT session_id, access_token, refresh_token, expires_at '
                                                        'FROM tokens')}
    finally:
        conn.close()


@pytest.fixture
def broken_lab(tmp_path):
    with incident_lab(tmp_path) as lab:
        yield write_inventory(lab, tmp_path)


def test_rollback_keeps_the_sessions_signed_in_after_the_run(broken_lab):
    before = rows(broken_lab.cache_path)
    rc, output = playbook(broken_lab.inventory_path, 'dr_restore.yml')
    assert rc == 0, output[-3000:]
    status, _body = broken_lab._post(f'{broken_lab.gateway_url}/api/v1/sessions', {'session_id': 'late'})
    assert status == 201
    since = rows(broken_lab.cache_path)
    assert 'late' in since and 'late' not in before
    run = json.loads(report_path(broken_lab.reports, 'lab.json').read_text())['purge']['backup_dir']

    rc, output = playbook(broken_lab.inventory_path, 'dr_rollback.yml', '-e', f'vllm_dr_rollback_dir={run}')
    assert rc == 0, output[-3000:]
    after = rows(broken_lab.cache_path)
    # every row written since is kept as it is; every row the run removed and the cache lacked is back
    assert {sid: after[sid] for sid in since} == since
    removed = {sid: row for sid, row in before.items() if sid not in since}
    assert {sid: after[sid] for sid in removed} == removed
    assert set(after) == set(before) | set(since)
    assert broken_lab.refresh('late')[0] == 200


def test_a_cache_that_cannot_be_merged_is_refused_naming_what_would_be_lost(tmp_path, capsys):
    cache = tmp_path / 'token_cache.db'
    conn = sqlite3.connect(cache)
    conn.execute('CREATE TABLE tokens (session_id TEXT PRIMARY KEY, access_token TEXT, refresh_token TEXT, expires_at REAL)')
    conn.execute("INSERT INTO tokens VALUES ('old', 'a', 'r', 4e9)")
    conn.commit()
    conn.close()
    args = {'path': str(cache), 'backup_dir': str(tmp_path / 'b')}
    os.mkdir(tmp_path / 'b', 0o700)
    purged = run_module(vllm_token_cache, dict(args, state='absent'), capsys)
    backup = [name for name in purged['backup_files'] if name.endswith('.bak')][0]
    # the service starts again with a cache of its own shape, without a primary key, and writes a row
    conn = sqlite3.connect(cache)
    conn.execute('CREATE TABLE tokens (session_id TEXT, access_token TEXT, refresh_token TEXT, expires_at REAL)')
    conn.execute("INSERT INTO tokens VALUES ('late', 'a2', 'r2', 4e9)")
    conn.commit()
    conn.close()
    refused = run_module(vllm_token_cache, dict(args, state='restored', restore_from=backup), capsys)
    assert refused['failed'] is True and len(refused['msg'].splitlines()) == 1
    assert 'holds 1 rows written since the run' in refused['msg'] and 'merge=false' in refused['msg']
    assert rows(cache) == {'late': ('a2', 'r2', 4e9)}
    forced = run_module(vllm_token_cache, dict(args, state='restored', restore_from=backup, merge=False), capsys)
    assert forced['changed'] is True and rows(cache) == {'old': ('a', 'r', 4e9)}
    assert any(name.endswith('.bak') for name in forced['backup_files'])

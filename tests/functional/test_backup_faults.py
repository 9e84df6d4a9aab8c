"""The sweep's backup under faults, against real redis-server and etcd: what left the store is what a restore brings back.

Each test counts from the store (before, after the fault, after the restore) and from the
backup files, read here by their documented format rather than by the module's reader.
The module runs as Ansible runs it, in a process of its own (so a file-size limit or a
kill hits the module alone).
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
import time

import pytest

from harness.backups import restorable
from harness.json_http import JsonAnswers
from harness.module_process import run_sweep, start_sweep, wait_sweep
from harness.servers import RedisServer
from harness.sessions import PREFIX, seed_etcd, session
from harness.sessions import dump_hashes as sessions


def seed(client, expired=0, valid=0):
    now = time.time()
    pipe = client.pipeline(transaction=False)
    for i in range(expired):
        pipe.hset(f'{PREFIX}e{i}', mapping=session(f'e{i}', str(int(now - 3600 - i))))
        if i % 10000 == 9999:
            pipe.execute()
    for i in range(valid):
        pipe.hset(f'{PREFIX}v{i}', mapping=session(f'v{i}', str(int(now + 86400))))
    pipe.execute()


@pytest.fixture
def server(tmp_path):
    with RedisServer(workdir=str(tmp_path / 'redis')) as redis_server:
        yield redis_server


@pytest.mark.slow
def test_disk_full_then_rerun_then_restore_brings_every_session_back(tmp_path, server):
    client = server.client()
    seed(client, expired=30000, valid=500)
    original = sessions(client)
    backup = tmp_path / 'run' / 'sessions.jsonl'
    full = run_sweep(tmp_path, server, prefix=['prlimit', '--fsize=2000000'], state='swept', backup_path=str(backup))
    assert full['_rc'] == 1 and '\n' not in full['msg'] and 'File too large' in full['msg']
    assert full['deleted'] > 0 and full['changed'] is True, 'the deletes that ran are reported'
    assert 'free space, then re-run with the same backup_path' in full['msg']
    gone = set(original) - set(sessions(client))
    assert len(gone) == full['deleted'] and gone <= set(restorable(backup))
    # the refused write leaves a torn last line, unless the limit fell just after a line's newline (lines vary in
    # length with the time in them: about one run in 150)
    torn = not backup.read_bytes().endswith(b'\n')

    rerun = run_sweep(tmp_path, server, state='swept', backup_path=str(backup))
    assert rerun['_rc'] == 0, rerun.get('msg')
    assert ('cut off a torn last line' in json.dumps(rerun.get('warnings'))) is torn, rerun.get('warnings')
    assert full['deleted'] + rerun['deleted'] == 30000
    gone = set(original) - set(sessions(client))
    assert len(gone) == 30000 and set(restorable(backup)) == gone

    back = run_sweep(tmp_path, server, state='restored', backup_path=str(backup))
    assert back['_rc'] == 0 and back['restored'] == 30000 and back['skipped_invalid'] == 0
    assert sessions(client) == original


@pytest.mark.slow
def test_a_plain_sweep_of_200k_sessions_restores_every_one(tmp_path, server):
    client = server.client()
    seed(client, expired=200000)
    original = sessions(client)
    backup = tmp_path / 'sessions.jsonl'
    swept = run_sweep(tmp_path, server, state='swept', backup_path=str(backup))
    assert swept['_rc'] == 0, swept.get('msg')
    assert (swept['scanned'], swept['matched'], swept['deleted']) == (200000, 200000, 200000)
    assert client.dbsize() == 0
    assert len(restorable(backup)) == 200000
    back = run_sweep(tmp_path, server, state='restored', backup_path=str(backup))
    assert back['restored'] == 200000 and back['skipped_existing'] == 0
    assert sessions(client) == original


@pytest.mark.slow
def test_three_sweeps_at_once_into_one_backup_file_one_writes_and_nothing_is_lost(tmp_path, server):
    client = server.client()
    seed(client, expired=50000, valid=100)
    original = sessions(client)
    backup = tmp_path / 'sessions.jsonl'
    processes = [start_sweep(tmp_path, server, state='swept', backup_path=str(backup), batch_size=200) for _run in range(3)]
    results = [wait_sweep(process) for process in processes]
    for result in results:
        assert result['_rc'] == 0 or 'is being written by another run right now' in result['msg'], result.get('msg')
        if result['_rc']:
            assert result['deleted'] == 0, 'a sweep refused its backup deleted nothing'
    gone = set(original) - set(sessions(client))
    assert len(gone) == 50000 == sum(result['deleted'] for result in results)
    assert set(restorable(backup)) == gone
    run_sweep(tmp_path, server, state='restored', backup_path=str(backup))
    assert sessions(client) == original


@pytest.mark.slow
def test_three_sweeps_at_once_into_their_own_files_together_restore_everything(tmp_path, server):
    client = server.client()
    seed(client, expired=50000, valid=100)
    original = sessions(client)
    backups = [tmp_path / f'sessions-{n}.jsonl' for n in range(3)]
    processes = [start_sweep(tmp_path, server, state='swept', backup_path=str(path), batch_size=200) for path in backups]
    results = [wait_sweep(process) for process in processes]
    assert all(result['_rc'] == 0 for result in results), [result.get('msg') for result in results]
    gone = set(original) - set(sessions(client))
    assert len(gone) == 50000 == sum(result['deleted'] for result in results)
    assert set(restorable(*backups)) == gone, 'a session two sweeps both read is restorable from the one that deleted it'
    for path in backups:
        run_sweep(tmp_path, server, state='restored', backup_path=str(path))
    assert sessions(client) == original


@pytest.mark.slow
def test_store_killed_mid_sweep_of_200k_then_rerun_then_restore(tmp_path):
    server = RedisServer(workdir=str(tmp_path / 'redis'), config=['appendonly yes', 'appendfsync always'])
    server.start()
    try:
        client = server.client()
        seed(client, expired=200000)
        original = sessions(client)
        backup = tmp_path / 'sessions.jsonl'
        process = start_sweep(tmp_path, server, state='swept', backup_path=str(backup))
        watcher = server.client()
        while watcher.dbsize() > 120000:
            time.sleep(0.01)
        server.kill()
        failed = wait_sweep(process)
        assert failed['_rc'] == 1 and '\n' not in failed['msg']
        assert failed['deleted'] > 0 and failed['changed'] is True and 're-run to finish' in failed['msg']

        port = server.port
        server.port = None
        server._choose_ports = lambda: setattr(server, 'port', port)  # pylint: disable=protected-access  # same port, same data
        server.start()
        client = server.client()
        gone = set(original) - set(sessions(client))
        in_backup = set(restorable(backup))
        assert gone <= in_backup, 'a session left the store without a backup line'
        assert len(in_backup - gone) <= 2 * 1000, 'only the deletes in flight when the store died may be undecided'

        rerun = run_sweep(tmp_path, server, state='swept', backup_path=str(backup))
        assert rerun['_rc'] == 0, rerun.get('msg')
        gone = set(original) - set(sessions(client))
        assert len(gone) == 200000 and set(restorable(backup)) == gone
        back = run_sweep(tmp_path, server, state='restored', backup_path=str(backup))
        assert back['restored'] == 200000 and back['_rc'] == 0
        assert sessions(client) == original
    finally:
        server.stop()


class _Introspection(JsonAnswers):
    """An RFC 7662 endpoint that says every token is revoked, then fails with 500 after ``budget`` answers."""

    budget = 0

    def do_POST(self):  # pylint: disable=invalid-name
        self.read_body()
        type(self).budget -= 1
        body, status = (b'{"active": false}', 200) if type(self).budget >= 0 else (b'{"error": "boom"}', 500)
        self.answer(status, body)


def test_a_sweep_stopped_by_the_identity_provider_reports_what_it_deleted(tmp_path, server):
    client = server.client()
    seed(client, valid=600)
    original = sessions(client)
    _Introspection.budget = 500
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Introspection)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        backup = tmp_path / 'sessions.jsonl'
        failed = run_sweep(tmp_path, server, state='swept', select='revoked', batch_size=50, backup_path=str(backup),
                           introspection_url=f'http://127.0.0.1:{httpd.server_port}/introspect',
                           introspection_client_id='vllm-dr', introspection_client_secret='s3cret-introspection')
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert failed['_rc'] == 1 and '\n' not in failed['msg']
    gone = set(original) - set(sessions(client))
    assert gone and failed['deleted'] == len(gone) and failed['changed'] is True
    assert set(restorable(backup)) == gone
    run_sweep(tmp_path, server, state='restored', backup_path=str(backup))
    assert sessions(client) == original


def test_backup_path_never_appends_to_a_file_that_is_not_our_private_backup(tmp_path, server):
    client = server.client()
    seed(client, expired=10)
    notes = tmp_path / 'notes.txt'
    notes.write_text('an operator\'s notes\n')
    os.chmod(notes, 0o644)
    refused = run_sweep(tmp_path, server, state='swept', backup_path=str(notes))
    assert refused['_rc'] == 1 and 'is not a private vllm_dr session backup' in refused['msg']
    assert notes.read_text() == 'an operator\'s notes\n' and os.stat(notes).st_mode & 0o777 == 0o644
    assert client.dbsize() == 10


def test_restore_writes_only_the_sessions_a_sweep_could_have_written(tmp_path, server):
    client = server.client()
    crafted = tmp_path / 'crafted.jsonl'
    lines = [
        {'vllm_dr_backup': 2, 'run': 'x', 'backend': 'redis'},
        {'key': PREFIX + 'ok', 'type': 'hash', 'fields': {'expires_at': '1', 'refresh_token': 'rt'}},
        {'key': 'config:admin2', 'type': 'hash', 'fields': {'role': 'admin'}},
        {'key': 'acl:evil', 'type': 'string', 'value': 'user evil on'},
        {'key': PREFIX + 'set', 'type': 'set', 'value': 'x'},
        {'key': None, 'type': 'hash', 'fields': {'a': 'b'}},
        {'key': PREFIX + 'nofields', 'type': 'hash'},
        {'key': PREFIX + 'empty', 'type': 'hash', 'fields': {}},
        {'key': PREFIX + 'typed', 'type': 'hash', 'fields': {'a': 1}},
    ]
    crafted.write_text(''.join(json.dumps(line) + '\n' for line in lines))
    os.chmod(crafted, 0o600)
    back = run_sweep(tmp_path, server, state='restored', backup_path=str(crafted))
    assert back['_rc'] == 0 and back['restored'] == 1
    assert (back['skipped_foreign'], back['skipped_invalid']) == (3, 4)
    assert sorted(client.keys('*')) == [(PREFIX + 'ok').encode()]
    assert client.hgetall(PREFIX + 'ok') == {b'expires_at': b'1', b'refresh_token': b'rt'}
    assert len(back['warnings']) == 4 + 1 and all('None' not in line for line in back['invalid_lines'])


def test_etcd_restore_writes_only_keys_under_the_prefix(tmp_path, etcd_server):
    crafted = tmp_path / 'crafted.jsonl'
    lines = [{'vllm_dr_backup': 2, 'run': 'x', 'backend': 'etcd'},
             {'key': 'faults/session/ok', 'type': 'json', 'value': '{"expires_at": 1}'},
             {'key': 'admin/injected', 'type': 'json', 'value': '{"role": "admin"}'},
             {'key': 'faults/session/h', 'type': 'hash', 'fields': {'a': 'b'}}]
    crafted.write_text(''.join(json.dumps(line) + '\n' for line in lines))
    os.chmod(crafted, 0o600)
    seed_etcd(etcd_server.url, prefix='faults/unrelated/')
    back = run_sweep(tmp_path, etcd_server, state='restored', backup_path=str(crafted), backend='etcd',
                     etcd_endpoints=[etcd_server.url], key_prefix='faults/session/')
    assert back['_rc'] == 0 and (back['restored'], back['skipped_foreign']) == (1, 2), back.get('msg')
    listed = subprocess.run(['etcdctl', f'--endpoints={etcd_server.url}', 'get', '', '--prefix', '--keys-only'],
                            capture_output=True, text=True, check=True).stdout.split()
    assert 'faults/session/ok' in listed and 'admin/injected' not in listed


def churn(server, stop: threading.Event, fillers: int = 60000):
    """Other keys of the same database added and removed in bulk, so that the table grows and shrinks under the SCAN.

    With the fillers the table has 2**17 buckets; without them the sessions fill under a
    tenth of it, and the server's cron (ten times a second) shrinks it: SCAN then lists
    again some keys of the buckets it had just visited.
    """
    client = server.client()
    names = [f'filler:{i}' for i in range(fillers)]
    while not stop.is_set():
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.set(name, 'x')
        pipe.execute()
        time.sleep(0.15)
        for start in range(0, fillers, 10000):
            client.unlink(*names[start:start + 10000])
        time.sleep(0.25)


@pytest.mark.slow
def test_keys_scan_lists_twice_while_the_table_resizes_are_judged_and_restored_once(tmp_path, server):
    client = server.client()
    seed(client, expired=5000)
    original = sessions(client)
    stop = threading.Event()
    resizer = threading.Thread(target=churn, args=(server, stop), daemon=True)
    resizer.start()
    try:
        backup = tmp_path / 'sessions.jsonl'
        swept = run_sweep(tmp_path, server, state='swept', backup_path=str(backup), max_rate=250, batch_size=100)
    finally:
        stop.set()
        resizer.join()
    assert swept['_rc'] == 0, swept.get('msg')
    assert (swept['scanned'], swept['matched'], swept['deleted']) == (5000, 5000, 5000)
    assert not sessions(client) and set(restorable(backup)) == set(original)
    back = run_sweep(tmp_path, server, state='restored', backup_path=str(backup))
    assert back['restored'] == 5000
    assert sessions(client) == original

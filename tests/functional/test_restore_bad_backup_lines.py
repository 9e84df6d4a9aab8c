"""A restore from a backup with bad lines, against a real redis-server and etcd: every bad line is skipped and named
(in the result, one warning each), every good one is restored, no key is written without the TTL its line gives, and
changed says whether anything was written."""

from __future__ import annotations

import json
import time

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_session_sweep
from harness.modules import run_module
from harness.servers import EtcdServer, RedisServer
from harness.sessions import PREFIX, iso, session


def restore(capsys, args, backup):
    return run_module(vllm_session_sweep, dict(args, state='restored', backup_path=str(backup)), capsys)


def write_backup(path, backend, lines):
    header = {'vllm_dr_backup': 2, 'backend': backend, 'store': 'test', 'created': time.time()}
    path.write_text('\n'.join(json.dumps(line) for line in [header] + lines) + '\n')


def warnings(result):
    """The warning lines of a module result (plain strings, or the summaries of ansible-core 2.19 and later)."""
    return [item['event']['msg'] if isinstance(item, dict) else item for item in result.get('warnings', [])]


def hash_line(key, pexpireat=None):
    line = {'key': key, 'type': 'hash', 'fields': session(key.rsplit(':', 1)[-1], iso(time.time() + 3600))}
    if pexpireat is not None:
        line['pexpireat'] = pexpireat
    return line


def test_restore_skips_and_names_each_line_with_an_impossible_ttl_and_restores_the_rest(capsys, tmp_path):
    later = int(time.time() * 1000) + 3_600_000
    lines = [hash_line(PREFIX + 'good0', later), hash_line(PREFIX + 'bad1', 10 ** 20), hash_line(PREFIX + 'good2', later),
             hash_line(PREFIX + 'bad3', 2 ** 63 + 5), hash_line(PREFIX + 'bad4', -7), hash_line(PREFIX + 'good5')]
    backup = tmp_path / 'b.jsonl'
    write_backup(backup, 'redis', lines)
    with RedisServer(workdir=str(tmp_path / 'r')) as server:
        client = server.client()
        result = restore(capsys, {'login_host': '127.0.0.1', 'login_port': server.port}, backup)
        assert result['_rc'] == 0, result.get('msg')
        assert result['changed'] is True and result['restored'] == 3 and result['skipped_invalid'] == 3
        names = sorted(key.decode() for key in client.scan_iter(match=PREFIX + '*'))
        assert names == [PREFIX + 'good0', PREFIX + 'good2', PREFIX + 'good5']
        assert 0 < client.pttl(PREFIX + 'good0') <= 3_600_000 and client.pttl(PREFIX + 'good5') == -1
        for number in (3, 5, 6):
            assert any(f'line {number}: "pexpireat"' in text for text in result['invalid_lines']), result['invalid_lines']
            assert sum(f'line {number}: "pexpireat"' in text for text in warnings(result)) == 1, warnings(result)


def test_restore_writes_no_key_the_server_cannot_give_its_ttl(capsys, tmp_path, monkeypatch):
    """Even a TTL the line check let through is given with the key in one step, or the key is not written."""
    from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import model
    monkeypatch.setattr(model, 'MAX_PEXPIREAT', 2 ** 70, raising=False)  # the line check out of the way: the server decides
    later = int(time.time() * 1000) + 3_600_000
    backup = tmp_path / 'b.jsonl'
    write_backup(backup, 'redis', [hash_line(PREFIX + 'bad0', 2 ** 64), hash_line(PREFIX + 'good1', later)])
    with RedisServer(workdir=str(tmp_path / 'r')) as server:
        client = server.client()
        result = restore(capsys, {'login_host': '127.0.0.1', 'login_port': server.port}, backup)
        assert result['_rc'] == 0, result.get('msg')
        assert result['changed'] is True and result['restored'] == 1 and result['skipped_invalid'] == 1
        assert client.exists(PREFIX + 'bad0') == 0 and client.exists(PREFIX + 'good1') == 1
        assert any('bad0' in text and 'expiry' in text for text in result['invalid_lines']), result['invalid_lines']


def test_restore_reports_no_change_when_every_line_is_bad(capsys, tmp_path):
    backup = tmp_path / 'b.jsonl'
    write_backup(backup, 'redis', [hash_line(PREFIX + 'bad0', 10 ** 20)])
    with RedisServer(workdir=str(tmp_path / 'r')) as server:
        result = restore(capsys, {'login_host': '127.0.0.1', 'login_port': server.port}, backup)
        assert result['_rc'] == 0 and result['changed'] is False and result['skipped_invalid'] == 1
        assert server.client().dbsize() == 0


def test_etcd_restore_skips_a_line_with_an_impossible_ttl_and_restores_the_rest(capsys, tmp_path):
    backup = tmp_path / 'b.jsonl'
    good = {'key': 'vllm/session/good0', 'type': 'json',
            'value': json.dumps(session('good0', iso(time.time() + 3600))), 'mod_revision': 5}
    bad = dict(good, key='vllm/session/bad1', pexpireat=10 ** 20)
    write_backup(backup, 'etcd', [bad, good])
    with EtcdServer(workdir=str(tmp_path / 'e')) as server:
        result = restore(capsys, {'backend': 'etcd', 'etcd_endpoints': [server.url]}, backup)
        assert result['_rc'] == 0, result.get('msg')
        assert result['changed'] is True and result['restored'] == 1 and result['skipped_invalid'] == 1
        assert sorted(server.keys('vllm/session/')) == ['vllm/session/good0']

"""The token cache logic against real SQLite files."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import stat
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import file_digest
from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import parse_expiry
from ansible_collections.inferops.vllm_dr.plugins.module_utils._token_cache import (
    TokenCache, TokenCacheError, expiry_epoch_sql, manage)
from harness.caches import WriteLockHolder, crash_after_write, expiring, make_cache, row_ids, set_mtime

NOW = time.time()


def snapshot(directory):
    """Every file in a directory with its digest: equal snapshots mean nothing changed."""
    return {name: file_digest(os.path.join(directory, name)) for name in sorted(os.listdir(directory))
            if os.path.isfile(os.path.join(directory, name))}


def without_shm(files):
    """-shm is SQLite's shared-memory index of the WAL, rewritten by every reader; it holds no rows."""
    return {name: digest for name, digest in files.items() if not name.endswith('-shm')}


@pytest.fixture
def cache_path(tmp_path):
    return str(tmp_path / 'token_cache.db')


def mixed_rows():
    """Every expiry format the caches in the field use, expired and not."""
    return [
        ('epoch-old', NOW - 86400),
        ('epoch-new', NOW + 86400),
        ('epoch-int-old', int(NOW - 60)),
        ('millis-old', int((NOW - 3600) * 1000)),
        ('millis-new', int((NOW + 3600) * 1000)),
        ('iso-z-old', '2024-07-10T12:00:00Z'),
        ('iso-offset-new', '2999-07-10T14:00:00+02:00'),
        ('iso-fraction-old', '2024-07-10T12:00:00.123456Z'),
        ('text-epoch-old', str(int(NOW - 10))),
        ('garbage', 'next tuesday'),
        ('null', None),
    ]


def test_inspect_missing_file_reports_absent(cache_path):
    info = TokenCache(cache_path).inspect(NOW)
    assert info['exists'] is False
    assert info['rows'] is None and info['integrity'] is None and info['files'] == []


def test_inspect_counts_every_expiry_format_in_sql(cache_path):
    make_cache(cache_path, mixed_rows())
    info = TokenCache(cache_path).inspect(NOW)
    assert info['integrity'] == 'ok'
    assert info['rows'] == 11
    assert info['malformed_rows'] == 2
    assert info['expired_rows'] == 6
    assert info['earliest_expiry'] == '2024-07-10T12:00:00Z'
    assert info['latest_expiry'] == '2999-07-10T12:00:00Z'


class CountingSteps(TokenCache):
    """A TokenCache whose connections count the SQLite virtual machine steps they run (every 100)."""

    steps = 0

    def _connect(self, readonly):
        conn = super()._connect(readonly)
        conn.set_progress_handler(self._step, 100)
        return conn

    @staticmethod
    def _step():
        CountingSteps.steps += 100
        return 0


def test_inspect_reads_each_expiry_once_not_once_per_figure(cache_path):
    """Counting expired and malformed rows and the earliest and latest expiry judges each row's expiry once: well
    under 3 times the SQLite steps of a single COUNT of the expired rows (each figure judging it anew costs over 4; the
    integrity check and the aggregates are the rest)."""
    iso = [(f'iso-{index}', '2024-07-10T12:00:00Z') for index in range(2000)]
    make_cache(cache_path, mixed_rows() + iso + expiring(4000) + expiring(4000, start=4000, offset=3600))
    conn = sqlite3.connect(cache_path)
    conn.set_progress_handler(CountingSteps._step, 100)
    CountingSteps.steps = 0
    conn.execute(f'SELECT count(*) FROM tokens WHERE {expiry_epoch_sql("expires_at")} < ?', (NOW,)).fetchone()
    conn.close()
    one_pass = CountingSteps.steps
    CountingSteps.steps = 0
    info = CountingSteps(cache_path).inspect(NOW)
    assert info['rows'] == 10011 and info['expired_rows'] == 6 + 2000 + 4000
    assert CountingSteps.steps < 3 * one_pass, (CountingSteps.steps, one_pass)


def test_inspect_changes_no_data_even_with_wal_sidecars(tmp_path, cache_path):
    crash_after_write(cache_path, expiring(20))
    before = snapshot(tmp_path)
    info = TokenCache(cache_path).inspect(NOW)
    assert info['rows'] == 20
    assert info['files'] == [cache_path, cache_path + '-wal', cache_path + '-shm']
    after = snapshot(tmp_path)
    assert after.keys() == before.keys()
    assert without_shm(after) == without_shm(before)


def test_cache_older_than_restore_is_stale_with_reason(cache_path):
    make_cache(cache_path, expiring(3))
    set_mtime(cache_path, 1720612800)  # 2024-07-10T12:00:00Z
    info = TokenCache(cache_path).inspect(NOW, restored_at=1721012400)
    assert info['stale'] is True
    assert '2024-07-10T12:00:00Z' in info['stale_reason'] and 'before the restore' in info['stale_reason']
    assert info['mtime'] == '2024-07-10T12:00:00Z'


def test_cache_written_after_restore_is_not_stale(cache_path):
    make_cache(cache_path, expiring(3))
    info = TokenCache(cache_path).inspect(NOW, restored_at=NOW - 600)
    assert info['stale'] is False and info['stale_reason'] is None


def test_recent_wal_write_makes_an_old_database_fresh(cache_path):
    crash_after_write(cache_path, expiring(3))
    set_mtime(cache_path, 1720612800)
    info = TokenCache(cache_path).inspect(NOW, restored_at=1721012400)
    assert info['stale'] is False


def test_inspect_reports_a_file_that_is_not_sqlite(cache_path):
    with open(cache_path, 'wb') as handle:
        handle.write(b'this is not a database' * 100)
    info = TokenCache(cache_path).inspect(NOW)
    assert info['exists'] is True
    assert info['integrity'] == 'file is not a database'
    assert info['rows'] is None


def test_directory_at_path_fails_with_the_fix(tmp_path):
    with pytest.raises(TokenCacheError, match=r'is a directory, not a token cache file; set path to .*token_cache\.db'):
        TokenCache(str(tmp_path)).inspect(NOW)


def test_missing_table_names_the_tables_found(cache_path):
    make_cache(cache_path, expiring(1))
    with pytest.raises(TokenCacheError, match=r"table 'sessions' not found .*\(tables: tokens\); set table"):
        TokenCache(cache_path, table='sessions').inspect(NOW)


def test_missing_column_names_the_columns_found(cache_path):
    make_cache(cache_path, expiring(1))
    with pytest.raises(TokenCacheError, match=r"column 'expiry' not found .*session_id, access_token.*set expires_column"):
        TokenCache(cache_path, expires_column='expiry').inspect(NOW)


def test_prune_removes_only_expired_rows_after_a_private_backup(tmp_path, cache_path):
    make_cache(cache_path, mixed_rows())
    result = manage(TokenCache(cache_path), 'pruned', NOW)
    assert result['changed'] is True
    assert result['removed_rows'] == 6
    assert row_ids(cache_path) == ['epoch-new', 'garbage', 'iso-offset-new', 'millis-new', 'null']
    (backup,) = result['backup_files']
    assert backup.startswith(str(tmp_path / 'token_cache.db.')) and backup.endswith('.bak')
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600
    assert len(row_ids(backup)) == 11
    assert result['diff'] == {'before': {'files': [cache_path], 'rows': 11, 'expired_rows': 6},
                              'after': {'files': [cache_path], 'rows': 5, 'expired_rows': 0}}


def test_prune_reads_each_expiry_once_for_its_count_and_its_delete(cache_path, monkeypatch):
    """The expiry of a million rows is the costly part of a prune: read once, counted and deleted by row."""
    make_cache(cache_path, mixed_rows())
    statements = []
    real_connect = TokenCache._connect

    def traced(self, readonly):
        conn = real_connect(self, readonly)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(TokenCache, '_connect', traced)
    result = manage(TokenCache(cache_path), 'pruned', NOW)
    assert result['removed_rows'] == 6 and result['rows'] == 11 and result['expired_rows'] == 6
    assert result['malformed_rows'] == 2
    expiry = expiry_epoch_sql('expires_at')
    assert len([sql for sql in statements if expiry in sql]) == 1, statements


@pytest.mark.parametrize('schema', [
    'CREATE TABLE tokens (session_id TEXT PRIMARY KEY, access_token TEXT, refresh_token TEXT, expires_at) WITHOUT ROWID',
    'CREATE TABLE tokens (session_id TEXT, access_token TEXT, refresh_token TEXT, expires_at, '
    'PRIMARY KEY (session_id, access_token)) WITHOUT ROWID',
    # a column that takes the name rowid, the same in every row: the rows are named by another alias of the rowid
    'CREATE TABLE tokens (session_id TEXT, access_token TEXT, refresh_token TEXT, expires_at, rowid INTEGER DEFAULT 1)',
], ids=['without-rowid', 'without-rowid-two-column-key', 'a-column-named-rowid'])
def test_prune_names_the_rows_by_their_key_in_any_table(tmp_path, cache_path, schema):
    conn = sqlite3.connect(cache_path, isolation_level=None)
    conn.execute(schema)
    conn.executemany('INSERT INTO tokens (session_id, access_token, refresh_token, expires_at) VALUES (?, ?, ?, ?)',
                     [(sid, f'at-{sid}', f'rt-{sid}', expiry) for sid, expiry in mixed_rows()])
    conn.close()
    result = manage(TokenCache(cache_path), 'pruned', NOW)
    assert result['removed_rows'] == 6 and len(row_ids(result['backup_files'][0])) == 11
    assert row_ids(cache_path) == ['epoch-new', 'garbage', 'iso-offset-new', 'millis-new', 'null']


def test_prune_vacuums_the_file(cache_path):
    make_cache(cache_path, expiring(5000) + expiring(10, start=5000, offset=3600))
    size_before = os.path.getsize(cache_path)
    manage(TokenCache(cache_path), 'pruned', NOW, backup=False)
    assert os.path.getsize(cache_path) < size_before / 10


def test_prune_check_mode_changes_nothing(tmp_path, cache_path):
    make_cache(cache_path, mixed_rows())
    before = snapshot(tmp_path)
    result = manage(TokenCache(cache_path), 'pruned', NOW, check_mode=True)
    assert result['changed'] is True and result['removed_rows'] == 6 and result['backup_files'] == []
    assert snapshot(tmp_path) == before


def test_prune_twice_changes_nothing_the_second_time(tmp_path, cache_path):
    make_cache(cache_path, mixed_rows())
    manage(TokenCache(cache_path), 'pruned', NOW)
    before = snapshot(tmp_path)
    result = manage(TokenCache(cache_path), 'pruned', NOW)
    assert result['changed'] is False and result['backup_files'] == []
    assert snapshot(tmp_path) == before


def test_prune_keeps_rows_in_the_wal_in_its_backup(tmp_path, cache_path):
    crash_after_write(cache_path, expiring(7) + expiring(3, start=7, offset=3600))
    result = manage(TokenCache(cache_path), 'pruned', NOW)
    assert result['removed_rows'] == 7
    names = sorted(os.path.basename(name) for name in result['backup_files'])
    assert [name.rsplit('.bak', 1)[1] for name in names] == ['', '-shm', '-wal']
    restore_dir = tmp_path / 'check'
    restore_dir.mkdir()
    for name in result['backup_files']:
        suffix = name.rsplit('.bak', 1)[1]
        os.link(name, restore_dir / f'copy.db{suffix}')
    assert len(row_ids(restore_dir / 'copy.db')) == 10


# A prune in a process whose files cannot grow past a limit: to it the disk is full after that many bytes.
PRUNE_ON_A_FULL_DISK = r'''
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), int(sys.argv[3])))
from ansible_collections.inferops.vllm_dr.plugins.module_utils._token_cache import TokenCache, TokenCacheError, manage
try:
    manage(TokenCache(sys.argv[1]), 'pruned', float(sys.argv[2]), backup_dir=sys.argv[4])
except TokenCacheError as exc:
    print(json.dumps({'error': str(exc)}))
else:
    print(json.dumps({'error': None}))
'''


def test_prune_whose_backup_fills_the_disk_deletes_nothing_and_leaves_no_partial_backup(tmp_path, cache_path):
    make_cache(cache_path, expiring(3000) + expiring(3000, start=3000, offset=3600))
    before = snapshot(tmp_path)
    backups = tmp_path / 'backups'
    limit = os.path.getsize(cache_path) // 2
    out = subprocess.run([sys.executable, '-c', PRUNE_ON_A_FULL_DISK, cache_path, repr(NOW), str(limit), str(backups)],
                         check=True, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    error = json.loads(out.stdout)['error']
    assert error and 'free space or choose another backup location' in error
    assert snapshot(tmp_path) == before
    assert os.listdir(backups) == []
    assert len(row_ids(cache_path)) == 6000


def test_prune_on_a_corrupt_file_fails_and_leaves_it(tmp_path, cache_path):
    with open(cache_path, 'wb') as handle:
        handle.write(b'garbage' * 1000)
    before = snapshot(tmp_path)
    with pytest.raises(TokenCacheError, match='not a healthy SQLite database .*use state=absent'):
        manage(TokenCache(cache_path), 'pruned', NOW)
    assert snapshot(tmp_path) == before


def test_prune_on_a_locked_database_fails_without_deleting_or_leaving_a_backup(tmp_path, cache_path):
    make_cache(cache_path, mixed_rows())
    holder = sqlite3.connect(cache_path, isolation_level=None)
    holder.execute('BEGIN IMMEDIATE')
    before = snapshot(tmp_path)
    try:
        with pytest.raises(TokenCacheError, match=r'is locked by another process .* for more than 0\.2s; retry'):
            manage(TokenCache(cache_path, lock_timeout=0.2), 'pruned', NOW)
    finally:
        holder.execute('ROLLBACK')
        holder.close()
    assert snapshot(tmp_path) == before


def test_prune_waits_for_a_short_lock(cache_path):
    make_cache(cache_path, mixed_rows())
    holder = sqlite3.connect(cache_path, isolation_level=None, check_same_thread=False)
    holder.execute('BEGIN IMMEDIATE')
    release = threading.Timer(0.3, lambda: holder.execute('ROLLBACK'))
    release.start()
    try:
        result = manage(TokenCache(cache_path, lock_timeout=5), 'pruned', NOW)
    finally:
        release.join()
        holder.close()
    assert result['removed_rows'] == 6


def test_absent_removes_database_and_sidecars_after_backing_them_up(tmp_path, cache_path):
    crash_after_write(cache_path, expiring(12))
    originals = without_shm(snapshot(tmp_path))
    result = manage(TokenCache(cache_path), 'absent', NOW)
    assert result['changed'] is True
    assert sorted(result['removed_files']) == sorted(cache_path + suffix for suffix in ('', '-shm', '-wal'))
    assert not any(os.path.exists(name) for name in result['removed_files'])
    backups = {name.rsplit('.bak', 1)[1]: name for name in result['backup_files']}
    for name, digest in originals.items():
        suffix = name[len('token_cache.db'):]
        assert file_digest(backups[suffix]) == digest
        assert stat.S_IMODE(os.stat(backups[suffix]).st_mode) == 0o600
    # what a copy of each backup must hash to, as written
    assert result['backup_checksums'] == {name: file_digest(name) for name in result['backup_files']}
    assert result['diff']['after'] == {'files': [], 'rows': None, 'expired_rows': None}


def test_absent_on_a_missing_cache_is_unchanged(cache_path):
    result = manage(TokenCache(cache_path), 'absent', NOW)
    assert result['changed'] is False and result['removed_files'] == [] and result['backup_files'] == []
    assert result['backup_checksums'] == {}


def test_absent_check_mode_removes_nothing(tmp_path, cache_path):
    crash_after_write(cache_path, expiring(3))
    before = snapshot(tmp_path)
    result = manage(TokenCache(cache_path), 'absent', NOW, check_mode=True)
    assert result['changed'] is True and len(result['removed_files']) == 3
    assert without_shm(snapshot(tmp_path)) == without_shm(before)


def test_absent_purges_a_corrupt_cache_after_backing_it_up(tmp_path, cache_path):
    with open(cache_path, 'wb') as handle:
        handle.write(b'SQLite format 3\x00' + b'\xff' * 4000)
    digest = file_digest(cache_path)
    result = manage(TokenCache(cache_path), 'absent', NOW)
    assert not os.path.exists(cache_path)
    assert file_digest(result['backup_files'][0]) == digest


@pytest.mark.parametrize('wal', [False, True], ids=['rollback-journal', 'wal'])
def test_absent_refuses_a_database_in_the_middle_of_a_write(tmp_path, cache_path, wal):
    make_cache(cache_path, expiring(3), wal=wal)
    with WriteLockHolder(cache_path):
        before = without_shm(snapshot(tmp_path))
        with pytest.raises(TokenCacheError, match='is locked by another process'):
            manage(TokenCache(cache_path, lock_timeout=0.2), 'absent', NOW)
        assert without_shm(snapshot(tmp_path)) == before
    assert row_ids(cache_path) == ['0x000000', '0x000001', '0x000002']


def test_absent_waits_for_a_write_to_finish(cache_path):
    make_cache(cache_path, expiring(3))
    with WriteLockHolder(cache_path) as holder:
        threading.Timer(0.3, holder.release).start()
        result = manage(TokenCache(cache_path, lock_timeout=5), 'absent', NOW)
    assert result['removed_files'] == [cache_path]


def test_unwritable_backup_dir_fails_before_anything_is_deleted(tmp_path, cache_path):
    make_cache(cache_path, mixed_rows())
    blocker = tmp_path / 'not-a-dir'
    blocker.write_text('x')
    before = snapshot(tmp_path)
    for state in ('pruned', 'absent'):
        with pytest.raises(TokenCacheError, match=r'backup_dir .*not-a-dir is not a directory; create it, fix'):
            manage(TokenCache(cache_path), state, NOW, backup_dir=str(blocker))
        assert snapshot(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason='root writes through permission bits')
def test_read_only_backup_dir_fails_before_anything_is_deleted(tmp_path, cache_path):
    make_cache(cache_path, mixed_rows())
    read_only = tmp_path / 'ro'
    read_only.mkdir(mode=0o500)
    with pytest.raises(TokenCacheError, match='is not writable'):
        manage(TokenCache(cache_path), 'absent', NOW, backup_dir=str(read_only))
    assert os.path.exists(cache_path)


def test_backup_dir_is_created_private(tmp_path, cache_path):
    make_cache(cache_path, expiring(2))
    target = tmp_path / 'backups' / 'run-1'
    result = manage(TokenCache(cache_path), 'absent', NOW, backup_dir=str(target))
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o700
    assert os.path.dirname(result['backup_files'][0]) == str(target)


def test_backup_false_writes_no_backup(tmp_path, cache_path):
    make_cache(cache_path, expiring(2))
    result = manage(TokenCache(cache_path), 'absent', NOW, backup=False)
    assert result['backup_files'] == [] and os.listdir(tmp_path) == []


def test_restore_puts_back_exactly_what_absent_removed(tmp_path, cache_path):
    crash_after_write(cache_path, expiring(9))
    originals = snapshot(tmp_path)
    purge = manage(TokenCache(cache_path), 'absent', NOW, backup_dir=str(tmp_path / 'bk'))
    main_backup = [name for name in purge['backup_files'] if name.endswith('.bak')][0]
    result = manage(TokenCache(cache_path), 'restored', NOW, restore_from=main_backup)
    assert result['changed'] is True
    assert without_shm(snapshot(tmp_path)) == without_shm(originals)
    assert os.path.exists(cache_path + '-shm')
    again = manage(TokenCache(cache_path), 'restored', NOW, restore_from=main_backup)
    assert again['changed'] is False


def test_restore_backs_up_the_current_cache_first(tmp_path, cache_path):
    make_cache(cache_path, expiring(4))
    old = manage(TokenCache(cache_path), 'absent', NOW, backup_dir=str(tmp_path / 'bk'))['backup_files'][0]
    make_cache(cache_path, expiring(2, prefix='new-'))
    result = manage(TokenCache(cache_path), 'restored', NOW, restore_from=old, backup_dir=str(tmp_path / 'bk2'),
                    merge=False)
    assert len(row_ids(cache_path)) == 4
    assert row_ids(result['backup_files'][0]) == ['new-000000', 'new-000001']


def test_restore_merges_the_removed_rows_into_the_rows_written_since(tmp_path, cache_path):
    make_cache(cache_path, expiring(4))
    old = manage(TokenCache(cache_path), 'absent', NOW, backup_dir=str(tmp_path / 'bk'))['backup_files'][0]
    make_cache(cache_path, expiring(2, prefix='new-') + [('0x000001', 4e9)])
    checked = manage(TokenCache(cache_path), 'restored', NOW, restore_from=old, check_mode=True)
    assert checked['changed'] is True and checked['restored_rows'] == 3 and len(row_ids(cache_path)) == 3
    result = manage(TokenCache(cache_path), 'restored', NOW, restore_from=old, backup_dir=str(tmp_path / 'bk2'))
    assert (result['restored_rows'], result['kept_rows'], result['restored_files']) == (3, 3, [])
    assert row_ids(cache_path) == ['0x000000', '0x000001', '0x000002', '0x000003', 'new-000000', 'new-000001']
    assert row_ids(result['backup_files'][0]) == ['0x000001', 'new-000000', 'new-000001']
    again = manage(TokenCache(cache_path), 'restored', NOW, restore_from=old, backup_dir=str(tmp_path / 'bk3'))
    assert again['changed'] is False and again['restored_rows'] == 0


def test_restore_check_mode_changes_nothing(tmp_path, cache_path):
    make_cache(cache_path, expiring(4))
    old = manage(TokenCache(cache_path), 'absent', NOW, backup_dir=str(tmp_path / 'bk'))['backup_files'][0]
    result = manage(TokenCache(cache_path), 'restored', NOW, restore_from=old, check_mode=True)
    assert result['changed'] is True and result['restored_files'] == [cache_path]
    assert not os.path.exists(cache_path)


def test_restore_from_a_file_that_is_not_a_backup_fails(tmp_path, cache_path):
    with pytest.raises(TokenCacheError, match=r'restore_from .* is not a backup file; give the main'):
        manage(TokenCache(cache_path), 'restored', NOW, restore_from=str(tmp_path / 'nothing.bak'))


@pytest.mark.parametrize('stored', [
    1700000000, 1700000000.5, 1700000000000, 100000000000, 100000000001, 99999999999.9, 0, -1,
    -62135596800, -62135596801, 253402300799999, 253402300800000, float('inf'), float('-inf'), None, b'blob',
    '1700000000', '  1700000000 ', '1700000000.5', '1700000000000', '5.', '2460000', '0', '', ' ', '1.2.3', 'next tuesday',
    '2024-07-10T12:00:00Z', ' 2024-07-10T12:00:00Z ', '2024-07-10 12:00:00', '2024-07-10', '2024-07-10T14:00:00+02:00',
    '0001-01-01T00:00:00Z', '0000-12-31 23:59:59', '6000-01-01T00:00:00Z', '9999-12-31T23:59:59Z', 'inf', 'NaN',
    '2024-07-10T12:00:00Z  ', '0002-01-01T00:00:00+14:00', '9998-12-31T23:59:59-14:00', '0001-01-01T00:00:00+01:00',
    '9999-12-31T23:59:59-01:00', '2024-13-10', '2024-07-10garbage', '2024-07-10T12:00:00.123Z',
], ids=repr)
def test_the_sql_reads_a_stored_expiry_as_python_does(stored):
    """A date after the year 5138 is a date, not milliseconds: a token that never expires ('9999-12-31') is not pruned
    as expired in 1978. Text with two dots is malformed, as in Python."""
    conn = sqlite3.connect(':memory:')
    conn.execute('CREATE TABLE t (expires_at)')
    conn.execute('INSERT INTO t VALUES (?)', (stored,))
    (read,) = conn.execute(f'SELECT {expiry_epoch_sql("expires_at")} FROM t').fetchone()
    expected = parse_expiry(stored) if stored is not None else None
    assert (read is None) == (expected is None), (read, expected)
    if expected is not None:
        assert read == pytest.approx(expected, abs=0.001)


@pytest.mark.parametrize('stored', ['-5', '+1700000000', '1e9', '.5'])
def test_the_sql_takes_a_signed_or_exponent_text_expiry_for_malformed_never_pruned(stored):
    conn = sqlite3.connect(':memory:')
    conn.execute('CREATE TABLE t (expires_at)')
    conn.execute('INSERT INTO t VALUES (?)', (stored,))
    assert conn.execute(f'SELECT {expiry_epoch_sql("expires_at")} FROM t').fetchone() == (None,)


def test_a_backup_that_cannot_be_made_durable_rolls_the_prune_back_and_leaves_no_copy(tmp_path, cache_path, monkeypatch):
    make_cache(cache_path, mixed_rows())
    before = snapshot(tmp_path)
    backups = tmp_path / 'backups'

    def no_space(_fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, 'fsync', no_space)
    with pytest.raises(TokenCacheError, match=r'could not be made durable \(No space left on device\); free space'):
        manage(TokenCache(cache_path), 'pruned', NOW, backup_dir=str(backups))
    monkeypatch.undo()
    assert snapshot(tmp_path) == before
    assert os.listdir(backups) == []
    assert len(row_ids(cache_path)) == 11


def damage_an_index_page(path):
    """Zero the cells of one leaf page of the session_id index: the table still reads, PRAGMA quick_check does not."""
    conn = sqlite3.connect(path)
    page_size = conn.execute('PRAGMA page_size').fetchone()[0]
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index'").fetchone()
    conn.close()
    with open(path, 'r+b') as handle:
        handle.seek((root - 1) * page_size)
        header = handle.read(12)
        assert header[0] == 0x02, 'the index is one page: make more rows'
        child = int.from_bytes(header[8:12], 'big')  # the root's right-most child, a leaf
        handle.seek((child - 1) * page_size + 8)
        handle.write(b'\x00' * (page_size - 8))


def test_prune_of_a_damaged_database_is_refused_before_anything_is_deleted(tmp_path, cache_path):
    make_cache(cache_path, expiring(3000) + expiring(3000, start=3000, offset=3600))
    damage_an_index_page(cache_path)
    before = snapshot(tmp_path)
    with pytest.raises(TokenCacheError, match=r'is not a healthy SQLite database \(On tree page \d+ cell .*use state=absent') as err:
        manage(TokenCache(cache_path), 'pruned', NOW, backup_dir=str(tmp_path / 'backups'))
    assert '\n' not in str(err.value)
    assert snapshot(tmp_path) == before
    assert not os.path.exists(tmp_path / 'backups') or os.listdir(tmp_path / 'backups') == []

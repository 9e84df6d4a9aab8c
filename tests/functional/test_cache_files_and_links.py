"""vllm_token_cache on real files: links, backup directories, empty and foreign files."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import file_digest
from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_token_cache
from harness.caches import crash_after_write, expiring, make_cache
from harness.modules import run_module

STATES = ['inspected', 'pruned', 'absent', 'restored']


def cache_module(capsys, check_mode=False, **args):
    return run_module(vllm_token_cache, args, capsys, check_mode=check_mode)


def tree(directory):
    """Every entry under ``directory``: links as their target, files as their digest, directories as None."""
    found = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, directory)] = (
                'link:' + os.readlink(path) if os.path.islink(path) else
                None if os.path.isdir(path) else file_digest(path))
    return found


def one_line_failure(result):
    assert result['_rc'] == 1 and result['failed'] is True
    assert '\n' not in result['msg'] and 'Traceback' not in result['msg']
    return result['msg']


@pytest.fixture
def linked_cache(tmp_path):
    """token_cache.db in ``real/``, reached through a link in ``service/``."""
    (tmp_path / 'real').mkdir()
    (tmp_path / 'service').mkdir()
    target = str(tmp_path / 'real' / 'token_cache.db')
    make_cache(target, expiring(3) + expiring(2, start=3, offset=3600))
    link = str(tmp_path / 'service' / 'token_cache.db')
    os.symlink(target, link)
    backup = str(tmp_path / 'real' / 'token_cache.db.20240715T031500.000000Z.bak')
    make_cache(backup, expiring(1))
    return link, target, backup


@pytest.mark.parametrize('state', STATES)
def test_a_symlinked_cache_path_is_refused_in_every_state_and_nothing_changes(capsys, tmp_path, linked_cache, state):
    link, target, backup = linked_cache
    before = tree(tmp_path)
    result = cache_module(capsys, path=link, state=state, restore_from=backup)
    message = one_line_failure(result)
    assert message.startswith(f'path {link} is a symbolic link to {target}; give the real path of the cache file')
    assert tree(tmp_path) == before


def test_a_symlinked_sidecar_is_refused(capsys, tmp_path):
    cache = str(tmp_path / 'token_cache.db')
    crash_after_write(cache, expiring(4))
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    os.rename(cache + '-wal', elsewhere / 'wal')
    os.symlink(elsewhere / 'wal', cache + '-wal')
    before = tree(tmp_path)
    for state in ('inspected', 'absent'):
        message = one_line_failure(cache_module(capsys, path=cache, state=state))
        assert message.startswith(f'{cache}-wal (a sidecar of path) is a symbolic link to {elsewhere / "wal"}; give the real')
        assert tree(tmp_path) == before


@pytest.fixture
def cache(tmp_path):
    path = str(tmp_path / 'cache' / 'token_cache.db')
    os.mkdir(os.path.dirname(path), 0o700)
    make_cache(path, expiring(3) + expiring(2, start=3, offset=3600))
    return path


def give_away(path):
    if os.geteuid() != 0:
        pytest.skip('needs root to give a directory away')
    os.chown(path, 65534, -1)


@pytest.mark.parametrize('kind, expected', [
    ('link', 'is a symbolic link to'),
    ('world-writable', 'is writable by everyone'),
    ('foreign', 'is owned by uid 65534'),
])
@pytest.mark.parametrize('state', ['pruned', 'absent'])
@pytest.mark.parametrize('check_mode', [False, True], ids=['run', 'check'])
def test_an_unfit_backup_dir_is_refused_before_anything_is_touched(capsys, tmp_path, cache, kind, expected, state,
                                                                   check_mode):
    real = tmp_path / 'backups'
    real.mkdir(mode=0o700)
    backup_dir = tmp_path / 'backup-link' if kind == 'link' else real
    if kind == 'link':
        os.symlink(real, backup_dir)
    elif kind == 'world-writable':
        real.chmod(0o777)
    else:
        give_away(real)
    before = tree(tmp_path)
    result = cache_module(capsys, check_mode=check_mode, path=cache, state=state, backup_dir=str(backup_dir))
    message = one_line_failure(result)
    assert message.startswith(f'backup_dir {backup_dir} ') and expected in message
    assert tree(tmp_path) == before


def test_backup_dir_levels_it_creates_are_private_under_umask_0(capsys, tmp_path, cache):
    previous = os.umask(0)
    try:
        result = cache_module(capsys, path=cache, state='absent', backup_dir=str(tmp_path / 'runs' / 'r1' / 'cache'))
    finally:
        os.umask(previous)
    assert result['_rc'] == 0, result.get('msg')
    modes = [stat.S_IMODE(os.stat(tmp_path / level).st_mode) for level in ('runs', 'runs/r1', 'runs/r1/cache')]
    assert modes == [0o700, 0o700, 0o700]


def tableless_database(path):
    conn = sqlite3.connect(path)
    conn.execute('PRAGMA user_version = 7')  # writes the header: an SQLite file with no table in it
    conn.close()


@pytest.mark.parametrize('kind', ['zero-bytes', 'no-table'])
def test_an_empty_cache_is_purged_without_a_backup_and_says_so(capsys, tmp_path, kind):
    path = str(tmp_path / 'token_cache.db')
    if kind == 'zero-bytes':
        open(path, 'wb').close()
        open(path + '-journal', 'wb').close()
    else:
        tableless_database(path)
    inspected = cache_module(capsys, path=path)
    assert inspected['_rc'] == 0, inspected.get('msg')
    assert inspected['empty'] is True and inspected['rows'] == 0 and inspected['integrity'] == 'ok'
    checked = cache_module(capsys, check_mode=True, path=path, state='absent')
    assert checked['changed'] is True and os.path.exists(path)
    result = cache_module(capsys, path=path, state='absent', backup_dir=str(tmp_path / 'bk'))
    assert result['_rc'] == 0, result.get('msg')
    assert result['changed'] is True and result['backup_files'] == []
    assert 'held no token table' in result['msg'] and 'no backup' in result['msg']
    assert not any(os.path.lexists(path + suffix) for suffix in ('', '-journal', '-wal', '-shm'))
    assert cache_module(capsys, path=path, state='absent')['changed'] is False


def test_a_database_with_other_tables_is_still_refused(capsys, tmp_path):
    path = str(tmp_path / 'token_cache.db')
    tableless_database(path)
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE other (x)')
    conn.close()
    open(path + '-journal', 'wb').close()
    digest = file_digest(path)
    message = one_line_failure(cache_module(capsys, path=path, state='absent'))
    assert "table 'tokens' not found" in message and '(tables: other)' in message
    assert file_digest(path) == digest
    # the same file without its table is empty: purged
    conn = sqlite3.connect(path)
    conn.execute('DROP TABLE other')
    conn.close()
    assert cache_module(capsys, path=path, state='absent')['changed'] is True and not os.path.exists(path)


@pytest.mark.parametrize('check_mode', [False, True], ids=['run', 'check'])
def test_a_file_that_is_not_sqlite_is_refused(capsys, tmp_path, check_mode):
    path = str(tmp_path / 'token_cache.db')
    with open(path, 'wb') as handle:
        handle.write(os.urandom(8192))
    before = tree(tmp_path)
    message = one_line_failure(cache_module(capsys, check_mode=check_mode, path=path, state='absent'))
    assert message.startswith(f'path {path} is not an SQLite database') and 'may not be the token cache' in message
    assert tree(tmp_path) == before

"""Backup directories on real files: private levels, no links, no one else's directory."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import (
    BackupError, check_private_dir, ensure_backup_dir)


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def open_umask():
    """umask 0: without an explicit mode every level would be created 0777."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def test_every_level_it_creates_is_0700_whatever_the_umask(tmp_path, open_umask):
    shared = tmp_path / 'shared'
    shared.mkdir()
    shared.chmod(0o755)
    target = shared / 'a' / 'b' / 'c'
    assert ensure_backup_dir(str(target)) == str(target)
    assert [mode_of(level) for level in (shared / 'a', shared / 'a' / 'b', target)] == [0o700] * 3
    assert mode_of(shared) == 0o755  # a level that existed is left as it was


def test_a_restrictive_umask_still_leaves_a_usable_0700_directory(tmp_path):
    previous = os.umask(0o277)
    try:
        ensure_backup_dir(str(tmp_path / 'x' / 'y'))
    finally:
        os.umask(previous)
    assert mode_of(tmp_path / 'x') == mode_of(tmp_path / 'x' / 'y') == 0o700


@pytest.mark.parametrize('suffix', ['', '/'])
def test_a_symlinked_directory_is_refused_naming_its_target(tmp_path, suffix):
    real = tmp_path / 'real'
    real.mkdir(mode=0o700)
    link = tmp_path / 'link'
    os.symlink(real, link)
    with pytest.raises(BackupError, match=rf'^backup_dir {link} is a symbolic link to {real}; give the real directory'):
        ensure_backup_dir(str(link) + suffix)
    assert os.listdir(real) == []


def test_a_dangling_link_is_refused_and_not_created_through(tmp_path):
    link = tmp_path / 'link'
    os.symlink(tmp_path / 'elsewhere', link)
    with pytest.raises(BackupError, match='is a symbolic link to'):
        ensure_backup_dir(str(link))
    assert not (tmp_path / 'elsewhere').exists()


@pytest.mark.parametrize('mode', [0o777, 0o1777, 0o703])
def test_a_world_writable_directory_is_refused(tmp_path, mode):
    target = tmp_path / 'open'
    target.mkdir()
    target.chmod(mode)
    with pytest.raises(BackupError, match=r'is writable by everyone, who could replace the backups: chmod go-w'):
        ensure_backup_dir(str(target))


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root to give a directory away')
def test_a_directory_writable_by_another_group_is_refused(tmp_path):
    target = tmp_path / 'team'
    target.mkdir()
    target.chmod(0o770)
    assert ensure_backup_dir(str(target)) == str(target)  # our own group may write
    other_gid = os.getegid() + 4242
    os.chown(target, -1, other_gid)
    target.chmod(0o770)
    with pytest.raises(BackupError, match=rf'is writable by group {other_gid}'):
        ensure_backup_dir(str(target))


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root to give a directory away')
def test_a_directory_owned_by_another_user_is_refused(tmp_path):
    target = tmp_path / 'theirs'
    target.mkdir(mode=0o700)
    os.chown(target, 65534, -1)
    with pytest.raises(BackupError, match=r'is owned by uid 65534, not by uid 0 that runs this module'):
        ensure_backup_dir(str(target))


def test_a_file_is_not_a_directory_and_a_check_creates_nothing(tmp_path):
    assert check_private_dir(str(tmp_path / 'missing')) is False
    assert not (tmp_path / 'missing').exists()
    blocker = tmp_path / 'file'
    blocker.write_text('x')
    with pytest.raises(BackupError, match='is not a directory; create it'):
        ensure_backup_dir(str(blocker / 'below'))
    with pytest.raises(BackupError, match='is not a directory; create it'):
        check_private_dir(str(blocker))

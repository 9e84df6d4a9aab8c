# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Private backup files: created exclusively, mode 0600, durable before anything is deleted.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import threading

PRIVATE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
_NOFOLLOW = getattr(os, 'O_NOFOLLOW', 0)
_DIR_FIX = 'create it, fix its permissions, or set backup_dir to a writable directory'
_CHUNK = 1024 * 1024


class BackupError(Exception):
    """A backup could not be written; nothing has been deleted."""


def check_private_dir(directory: str) -> bool:
    """Whether ``directory`` exists (False: missing); raise BackupError unless it is fit to hold backups.

    Fit means: a real directory, not a symbolic link (real_directory_stat); owned by the user running the module
    or by root; writable by no one else, that is neither world-writable nor group-writable unless its group is the
    running user's own (effective) group. Only ``directory`` itself is judged, not its parents.
    """
    info = real_directory_stat(directory, 'backup_dir', _DIR_FIX)
    if info is None:
        return False
    _check_owner_and_mode(_without_trailing_slash(directory), info)
    return True


def real_directory_stat(directory: str, option: str, fix: str, error: type = BackupError):
    """The stat of ``directory`` (None when it is missing); ``error`` naming ``option`` and ``fix`` when it is a
    symbolic link or not a directory.

    Checked with the directory opened with O_NOFOLLOW, so that it cannot be swapped for a link between a check and
    the open: whatever is written into it then goes where the user named, never where a link points.
    """
    directory = _without_trailing_slash(directory)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    except FileNotFoundError:
        if os.path.islink(directory):  # a dangling link
            raise _link_error(directory, option, error) from None
        return None
    except OSError as exc:
        if os.path.islink(directory):
            raise _link_error(directory, option, error) from None
        if exc.errno == errno.ENOTDIR:
            raise error(f'{option} {directory} is not a directory; {fix}') from None
        raise error(f'{option} {directory} cannot be opened ({exc.strerror}); {fix}') from None
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def ensure_backup_dir(directory: str) -> str:
    """``directory``, created when missing, after check_private_dir accepts it.

    Every level the call creates is made mode 0700 whatever the umask; levels
    that exist already are left as they are.
    """
    if not check_private_dir(directory):
        _make_private_dirs(_without_trailing_slash(directory))
        check_private_dir(directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise BackupError(f'backup_dir {directory} is not writable; {_DIR_FIX}')
    return directory


def _make_private_dirs(directory: str) -> None:
    parent = os.path.dirname(directory)
    if parent and parent != directory and not os.path.lexists(parent):
        _make_private_dirs(parent)
    try:
        os.mkdir(directory, PRIVATE_DIR_MODE)
    except FileExistsError:
        return  # made meanwhile by someone else: the caller judges it
    except OSError as exc:
        raise BackupError(f'backup_dir {directory} cannot be created ({exc.strerror}); {_DIR_FIX}') from None
    os.chmod(directory, PRIVATE_DIR_MODE)  # mkdir's mode is narrowed by the umask; 0700 exactly is wanted


def _check_owner_and_mode(directory: str, info: os.stat_result) -> None:
    uid = os.geteuid()
    if info.st_uid not in (uid, 0):
        raise BackupError(f'backup_dir {directory} is owned by uid {info.st_uid}, not by uid {uid} that runs this '
                          'module (or root); its owner could read or replace the backups: give a directory of your own')
    mode = stat.S_IMODE(info.st_mode)
    if mode & stat.S_IWOTH or (mode & stat.S_IWGRP and info.st_gid != os.getegid()):
        who = 'everyone' if mode & stat.S_IWOTH else f'group {info.st_gid}'
        raise BackupError(f'backup_dir {directory} (mode {mode:04o}) is writable by {who}, who could replace the '
                          f'backups: chmod go-w {directory}, or give a private directory (0700)')


def _link_error(directory: str, option: str, error: type) -> Exception:
    return error(f'{option} {directory} is a symbolic link to {os.readlink(directory)}; '
                 'give the real directory, so that files cannot be redirected')


def _without_trailing_slash(directory: str) -> str:
    # 'link/' would resolve the link before lstat or O_NOFOLLOW could see it
    return directory.rstrip('/') or '/'


def open_private(path: str):
    """A new file opened for binary writing, mode 0600; never overwrites or follows a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    try:
        fd = os.open(path, flags, PRIVATE_MODE)
    except FileExistsError:
        raise BackupError(f'backup file {path} already exists; remove it or choose another backup location') from None
    except OSError as exc:
        raise BackupError(f'backup file {path} cannot be created ({exc.strerror}); '
                          'fix the permissions of its directory or choose another backup location') from None
    os.fchmod(fd, PRIVATE_MODE)  # the umask must not widen or narrow it
    return os.fdopen(fd, 'wb')


def make_durable(handle, path: str) -> None:
    """Flush the open file ``path`` and its directory entry to stable storage."""
    handle.flush()
    os.fsync(handle.fileno())
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_private(source: str, destination: str, follow_links: bool = True, durable: bool = True) -> None:
    """Copy ``source`` to a new 0600 ``destination`` and make it durable.

    With ``follow_links=False`` a ``source`` that is a symbolic link is refused when it is
    opened, so a file checked with lstat cannot be swapped for a link before it is copied.
    With ``durable=False`` the caller makes it durable (``Sealing``) before it deletes anything.
    """
    try:
        src = os.fdopen(os.open(source, os.O_RDONLY | (0 if follow_links else _NOFOLLOW)), 'rb')
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise BackupError(f'{source} became a symbolic link while it was backed up; nothing was removed: '
                              'give the real path of the cache and re-run') from None
        raise BackupError(f'cannot read {source} for its backup ({exc.strerror}); check its permissions') from None
    with src:
        dst = open_private(destination)
        try:
            with dst:
                _copy_contents(src, dst)
                if durable:
                    make_durable(dst, destination)
        except OSError as exc:
            _remove_quietly(destination)
            raise BackupError(f'backup of {source} to {destination} failed ({exc.strerror}); '
                              'free space or choose another backup location') from None


def _copy_contents(src, dst) -> None:
    """Copy the open file ``src`` into ``dst``: inside the kernel where it can (no pass through this process's
    memory, which halves the time a large cache is held locked), else through a buffer."""
    sendfile = getattr(os, 'sendfile', None)
    if sendfile is not None:
        offset = 0
        try:
            while True:
                sent = sendfile(dst.fileno(), src.fileno(), offset, _CHUNK * 8)
                if not sent:
                    return
                offset += sent
        except OSError as exc:
            if offset or exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.ENOTSOCK):
                raise
    shutil.copyfileobj(src, dst, _CHUNK)


class Sealing:
    """Backup copies made durable and hashed in a thread of their own while the caller goes on.

    A prune's DELETE runs meanwhile (SQLite and the fsync both work without the GIL);
    ``wait()`` comes before the change is committed, so nothing is committed that its
    backup could not hold. On failure the copies are removed and ``wait()`` raises
    BackupError. ``wait()`` returns each copy's sha256, as file_digest gives it.
    """

    def __init__(self, paths: list):
        self.paths = list(paths)
        self._digests = {}
        self._error = None
        self._thread = threading.Thread(target=self._seal, name='backup-sealing', daemon=True)
        self._thread.start()

    def _seal(self) -> None:
        try:
            for path in self.paths:
                with open(path, 'rb') as handle:
                    os.fsync(handle.fileno())
                    self._digests[path] = _digest_of(handle)
            for directory in sorted({os.path.dirname(os.path.abspath(path)) for path in self.paths}):
                fsync_directory(directory)
        except OSError as exc:
            self._error = exc

    def wait(self) -> dict:
        self._thread.join()
        if self._error is not None:
            for path in self.paths:
                _remove_quietly(path)
            raise BackupError(f'backup to {", ".join(self.paths)} could not be made durable ({self._error.strerror}); '
                              'free space or choose another backup location')
        return dict(self._digests)


def _digest_of(handle) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(_CHUNK), b''):
        digest.update(chunk)
    return digest.hexdigest()


def file_digest(path: str) -> str:
    with open(path, 'rb') as handle:
        return _digest_of(handle)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

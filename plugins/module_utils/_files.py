# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Private backup files: created exclusively, mode 0600, durable before anything is deleted.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import hashlib
import os
import shutil

PRIVATE_MODE = 0o600
_CHUNK = 1024 * 1024


class BackupError(Exception):
    """A backup could not be written; nothing has been deleted."""


def ensure_backup_dir(directory: str) -> str:
    """Create ``directory`` (0700) when missing; fail unless it is a writable directory."""
    fix = 'create it, fix its permissions, or set backup_dir to a writable directory'
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise BackupError(f'backup_dir {directory} is not a directory; {fix}')
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise BackupError(f'backup_dir {directory} cannot be created ({exc.strerror}); {fix}') from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise BackupError(f'backup_dir {directory} is not writable; {fix}')
    return directory


def open_private(path: str):
    """A new file opened for binary writing, mode 0600; never overwrites or follows a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0)
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


def copy_private(source: str, destination: str) -> None:
    """Copy ``source`` to a new 0600 ``destination`` and make it durable."""
    try:
        src = open(source, 'rb')
    except OSError as exc:
        raise BackupError(f'cannot read {source} for its backup ({exc.strerror}); check its permissions') from None
    with src:
        dst = open_private(destination)
        try:
            with dst:
                shutil.copyfileobj(src, dst, _CHUNK)
                make_durable(dst, destination)
        except OSError as exc:
            _remove_quietly(destination)
            raise BackupError(f'backup of {source} to {destination} failed ({exc.strerror}); '
                              'free space or choose another backup location') from None


def file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b''):
            digest.update(chunk)
    return digest.hexdigest()


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The files of a run's report, written side by side in one call: each whole or not at all.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import fsync_directory, real_directory_stat


class ReportError(Exception):
    """A report file could not be written, or the request names no file it may write."""


def parse_mode(value, option: str) -> int:
    """An octal permission string ('0640', '640') as a number; ReportError naming the option otherwise."""
    text = str(value)
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        raise ReportError(f'{option} {text!r} is not an octal permission; give it as a quoted string such as "0640"')
    return mode


def as_text(name: str, content) -> str:
    """A file's text: text as it is; a dict or a list as JSON (keys sorted, indented by 2, as to_nice_json(indent=2)).

    ansible-core before 2.19 turns a templated string that reads as JSON back into a dict;
    this writes it as the filter would have, so the file is the same on every core.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, (dict, list)):
        return json.dumps(content, indent=2, sort_keys=True, separators=(',', ': '))
    raise ReportError(f'files: the content of {name} is {type(content).__name__}; give text, a dict or a list')


def check_names(files: dict) -> None:
    """Every key of ``files`` is a plain file name: ReportError naming the first that is not."""
    if not files:
        raise ReportError('files is empty; give at least one file name and its content')
    for name in files:
        if not name or name in ('.', '..') or '/' in name or '\0' in name:
            raise ReportError(f'files: {name!r} is not a plain file name; give names without a directory, '
                              'the directory goes into path')


def _same(path: str, data: bytes, mode: int) -> bool:
    """Whether ``path`` is a regular file that already holds ``data`` with ``mode``."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) != mode or info.st_size != len(data):
        return False
    with open(path, 'rb') as handle:
        return handle.read() == data


def _write_whole(path: str, data: bytes, mode: int) -> None:
    """Replace ``path`` by a file that holds ``data``: written beside it, made durable, renamed over it."""
    directory = os.path.dirname(path)
    fd, temporary = tempfile.mkstemp(prefix='.' + os.path.basename(path) + '.', dir=directory)
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def check_latest(directory: str, name: str) -> str:
    """The path of the link ``name`` beside ``directory``; ReportError when it cannot be one, or its parent is a link."""
    if not name or name in ('.', '..') or '/' in name or '\0' in name:
        raise ReportError(f'latest: {name!r} is not a plain file name; give a name such as latest')
    parent = os.path.dirname(directory.rstrip('/') or '/')
    real_directory_stat(parent, 'the parent of path', 'choose another path', ReportError)
    link = os.path.join(parent, name)
    if os.path.lexists(link) and not os.path.islink(link):
        raise ReportError(f'latest: {link} exists and is not a symbolic link; remove it or choose another name')
    return link


def point_latest(directory: str, name: str) -> str:
    """Make ``name`` beside ``directory`` a symbolic link to it (relative), replaced whole; its path.

    Runs that share a parent each write their own directory; the link names the one written last, so a reader
    that wants "the last run" finds it without any run's files being overwritten.
    """
    directory = directory.rstrip('/') or '/'
    parent, link = os.path.dirname(directory), check_latest(directory, name)
    temporary = os.path.join(parent, f'.{name}.{os.getpid()}.{os.urandom(4).hex()}')
    try:
        os.symlink(os.path.basename(directory), temporary)
        os.replace(temporary, link)
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise ReportError(f'cannot point {link} at {directory} ({exc.strerror}); fix the permissions of {parent}') from None
    fsync_directory(parent)
    return link


def write_report(directory: str, files: dict, mode: int, directory_mode: int, check_mode: bool = False,
                 latest: str | None = None) -> dict:
    """Write each of ``files`` (name -> text, or a dict or list: as_text) into ``directory``, made with ``directory_mode`` when missing.

    A ``directory`` that is a symbolic link is refused (ReportError) before anything is written. With ``latest``,
    that name beside ``directory`` is then pointed at it (point_latest).

    A file that already holds the same text with ``mode`` is left as it is. Each file is
    replaced whole (a reader sees the old report or the new one, never half of one) and is
    durable when this returns. In check mode nothing is written; the answer says what would be.
    Returns ``{'changed', 'written': [paths], 'unchanged': [paths], 'created_directory'}``.
    """
    check_names(files)
    link = None if latest is None else check_latest(directory, latest)
    named = directory.rstrip('/') or '/'
    if os.path.lexists(named) and not os.path.islink(named) and not os.path.isdir(named):
        raise ReportError(f'path {directory} exists and is not a directory; remove it or choose another path')
    # a link would put the report (and replace files) where it points, not where the user named: refused
    created = not os.path.lexists(named) or real_directory_stat(named, 'path', 'choose another path', ReportError) is None
    written, unchanged = [], []
    encoded = [(os.path.join(directory, name), as_text(name, content).encode('utf-8'))
               for name, content in sorted(files.items())]
    if created and not check_mode:
        try:
            os.makedirs(directory, mode=directory_mode)
            os.chmod(directory, directory_mode)  # the umask must not narrow it
        except OSError as exc:
            raise ReportError(f'cannot create the report directory {directory} ({exc.strerror}); '
                              'fix the permissions of its parent or choose another path') from None
    for path, data in encoded:
        if not created and _same(path, data, mode):
            unchanged.append(path)
            continue
        written.append(path)
        if check_mode:
            continue
        try:
            _write_whole(path, data, mode)
        except OSError as exc:
            raise ReportError(f'cannot write the report file {path} ({exc.strerror}); '
                              'free space, fix the permissions of its directory or choose another path') from None
    if written and not check_mode:
        fsync_directory(directory)
    if latest is not None and not check_mode:
        point_latest(directory, latest)
    return {'changed': bool(written) or created, 'written': written, 'unchanged': unchanged,
            'created_directory': created, 'latest': link}

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Session backups: JSON Lines, mode 0600, one writer, every line durable before the delete it covers.

A backup file is a series of runs. Each run (one sweep) starts with a header line and
has exactly one writer while it lasts (an exclusive lock on the file):
  {"vllm_dr_backup": 2, "run": ..., "backend": ..., "store": ..., "created": ...}
  {"key": ..., "type": "hash", "fields": {...}, ...}         an entry about to be deleted
  {"not_deleted": [key, ...], "entries": [n, ...]}           entries of this run that were kept

An entry's number is its place among the entry lines of its run (1 for the first after
the header), so a ``not_deleted`` line cancels exactly the entries it answers, never an
earlier entry of the same key (SCAN may list a key twice) nor another run's. Format 1
files (``not_deleted`` by key only) are still read: a key there cancels its nearest
earlier entry.

A re-run appends a new run to its own earlier backup, after cutting off a torn last
line (a write that failed half-way, whose delete was never sent). Reading reports and
skips lines that are not valid entries, instead of refusing the whole file.

Keys and values are stored as text when they are UTF-8, else as {"b64": ...}: the
backup is readable with grep and still holds the exact bytes.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import functools
import itertools
import json
import os
import stat
import threading
import uuid

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import BackupError, ensure_backup_dir, fsync_directory, PRIVATE_MODE
from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import iso_utc
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.model import (
    BackupLineError, Entry, decode_bytes, encode_bytes,
)

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
_chain = itertools.chain.from_iterable
# Bytes that JSON (with ensure_ascii) writes as they are: printable ASCII but the quote and the backslash.
_PLAIN = bytes(range(0x20, 0x7f)).replace(b'"', b'').replace(b'\\', b'')


def backup_lines(entries) -> bytes:
    """The backup lines of ``entries``, each with its newline: the to_line() of each, in UTF-8.

    A sweep writes one line per deleted session, so the usual batch (hashes whose keys,
    field names and values are printable ASCII that JSON writes as they are) is
    checked once and formatted in one go, without the JSON encoder.
    """
    templates = []
    args = []
    add, add_all, add_template = args.append, args.extend, templates.append
    kind = count = template = None  # the last line's shape without metadata, and its template
    for entry in entries:
        fields = entry.fields
        if fields is None or entry.value is not None:
            return _encoded_lines(entries)
        add(entry.key)
        add_all(_chain(fields.items()))
        if entry.pexpireat is None and entry.version is None and not entry.lease:
            if entry.kind != kind or len(fields) != count:
                kind, count = entry.kind, len(fields)
                template = _line_template(kind, count, ())
            add_template(template)
        else:
            metadata = tuple(entry.metadata())
            add_all([b'%d' % number for _name, number in metadata])
            add_template(_line_template(entry.kind, len(fields), tuple(name for name, _number in metadata)))
    joined = b''.join(args)
    if joined.translate(None, _PLAIN) or b'b64:' in joined:
        return _encoded_lines(entries)
    return b''.join(templates) % tuple(args)


def _encoded_lines(entries) -> bytes:
    return b''.join([entry.to_line() + b'\n' for entry in entries])


@functools.lru_cache(maxsize=64)
def _line_template(kind: str, count: int, metadata: tuple) -> bytes:
    """``{"key":"%s","type":kind,"fields":{"%s":"%s",...},"name":%s...}`` and a newline."""
    pairs = b','.join([b'"%s":"%s"'] * count)
    extra = b''.join([b',"%s":%%s' % name for name in metadata])
    return b'{"key":"%%s","type":"%s","fields":{%s}%s}\n' % (kind.encode('ascii'), pairs, extra)


class BackupWriter:
    """Appends one run to a backup file; every line is fsynced before the write that holds it reports done.

    Thread-safe. The file is opened (and locked for this run alone) with the first
    entries. Entries go through start_entries: a thread of its own writes them, and when
    more are queued by then (several partitions, or a slow disk), writes them together
    and fsyncs once for all of them.
    """

    def __init__(self, path: str, header: dict):
        self.path = path
        self.repaired = 0  # bytes of a torn last line cut off before this run was appended
        self._lock = threading.Lock()  # the file
        self._header = header
        self._handle = None
        self._queued = threading.Condition()  # the queue, the entry numbers and the thread
        self._queue = []
        self._numbered = 0
        self._thread = None
        self._closing = False
        self._failed = None  # the BackupError of a failed write: every later write fails with it

    def _open(self):
        fd, self.repaired = open_for_run(self.path, self._header['backend'])
        self._handle = os.fdopen(fd, 'ab')
        self._write_lines([dict(self._header, vllm_dr_backup=FORMAT_VERSION)])
        fsync_directory(os.path.dirname(os.path.abspath(self.path)))

    def _write_lines(self, records) -> None:
        self._write(''.join([json.dumps(record, separators=(',', ':')) + '\n' for record in records]).encode('utf-8'))

    def _write(self, payload: bytes) -> None:
        """Append and fsync; after a failed write (the file may end in part of a line) nothing more is appended."""
        if self._failed is not None:
            raise self._failed
        try:
            self._handle.write(payload)
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:
            self._failed = BackupError(f'writing backup_path {self.path} failed ({exc.strerror}); nothing more was '
                                       'deleted: free space, then re-run with the same backup_path')
            raise self._failed from None

    def write_entries(self, entries) -> None:
        """Durably record entries that are about to be deleted."""
        self.start_entries(entries).result()

    def start_entries(self, entries) -> concurrent.futures.Future:
        """Record entries that are about to be deleted; they are durable once the answer's result() returns.

        The lines are formatted here; the caller goes on (judging the next batch) while
        the backup thread writes and fsyncs them. result() raises the BackupError of a
        failed write. Each entry gets its ``number`` in the run, in the order of the lines.
        """
        payload = backup_lines(entries)
        if self._handle is None:  # only the first time: the lock is the backup thread's while it fsyncs
            with self._lock:
                if self._handle is None:
                    self._open()
        written = concurrent.futures.Future()
        with self._queued:
            for number, entry in enumerate(entries, self._numbered + 1):
                entry.number = number
            self._numbered += len(entries)
            self._queue.append((payload, written))
            if self._thread is None:
                self._thread = threading.Thread(target=self._write_queued, name='vllm-dr-backup', daemon=True)
                self._thread.start()
            self._queued.notify()
        return written

    def _write_queued(self) -> None:
        while True:
            with self._queued:
                while not self._queue and not self._closing:
                    self._queued.wait()
                if not self._queue:
                    return
                taken, self._queue = self._queue, []
            try:
                with self._lock:
                    self._write(b''.join([payload for payload, _written in taken]))
            except BackupError as exc:
                for _payload, written in taken:
                    written.set_exception(exc)
            else:
                for _payload, written in taken:
                    written.set_result(None)

    def write_not_deleted(self, entries) -> None:
        """Record that entries written above (durable already) were kept: refreshed meanwhile, or never deleted."""
        if not entries:
            return
        with self._lock:
            self._write_lines([{'not_deleted': [encode_bytes(entry.key) for entry in entries],
                                'entries': [entry.number for entry in entries]}])

    def close(self) -> None:
        """Finish the queued writes, then close the file (which ends this run's lock)."""
        if self._thread is not None:
            with self._queued:
                self._closing = True
                self._queued.notify()
            self._thread.join()
            self._thread = None
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def header(backend: str, location: str, now: float) -> dict:
    """A run's header; its run id is unique, so two runs in one file never mix."""
    return {'run': uuid.uuid4().hex, 'backend': backend, 'store': location, 'created': iso_utc(now)}


# ---- who may write where ---------------------------------------------------------------------

_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0)
_HEADER_LIMIT = 64 * 1024


def prepare_backup_path(path: str, backend: str) -> None:
    """Before anything is deleted: the directory exists (made 0700) and an existing file may take another run."""
    if os.path.isdir(path):
        raise BackupError(f'backup_path {path} is a directory; give a file name, e.g. {os.path.join(path, "sessions.jsonl")}')
    ensure_backup_dir(os.path.dirname(os.path.abspath(path)))
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _not_ours(path, exc.strerror) from None
    try:
        _check_continuable(fd, path, backend)
    finally:
        os.close(fd)


def open_for_run(path: str, backend: str):
    """(fd, bytes cut off) of the backup file, locked for this run alone, ready to append the run's header.

    A new file is created exclusively (0600). An existing one is continued only when it
    is this collection's backup of the same kind of store, owned by this user and private;
    a torn last line (a failed write, whose delete was never sent) is cut off first.
    """
    created = False
    try:
        fd = os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
        created = True
    except FileExistsError:
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError as exc:
            raise _not_ours(path, exc.strerror) from None
    except OSError as exc:
        raise BackupError(f'backup_path {path} cannot be created ({exc.strerror}); '
                          'choose a writable location for backup_path') from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BackupError(f'backup_path {path} is being written by another run right now; wait for it to finish, '
                              'or give this run its own backup_path') from None
        if created:
            os.fchmod(fd, PRIVATE_MODE)  # the umask must not widen or narrow it
            return fd, 0
        _check_continuable(fd, path, backend)
        return fd, _cut_torn_tail(fd)
    except BaseException:
        os.close(fd)
        raise


def _not_ours(path: str, why: str) -> BackupError:
    return BackupError(f'backup_path {path} exists and is not a private vllm_dr session backup of this user ({why}); '
                       'give a new file name for backup_path')


def _check_continuable(fd: int, path: str, backend: str) -> None:
    """Refuse a file that a run must not append to: not ours, not private, or not a backup of this kind of store."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _not_ours(path, 'not a regular file')
    if info.st_uid != os.geteuid():
        raise _not_ours(path, f'owned by uid {info.st_uid}, not {os.geteuid()}')
    if info.st_mode & 0o077:
        raise _not_ours(path, f'mode {stat.S_IMODE(info.st_mode):04o}, open to others')
    if info.st_size == 0:
        return
    first = os.pread(fd, _HEADER_LIMIT, 0).split(b'\n', 1)[0]
    try:
        record = json.loads(first)
    except ValueError:
        record = None
    if not isinstance(record, dict) or 'vllm_dr_backup' not in record:
        raise _not_ours(path, 'no vllm_dr backup header on its first line')
    _check_header(record, path, backend)


def _cut_torn_tail(fd: int) -> int:
    """Cut the file after its last complete line; the number of bytes cut."""
    size = os.fstat(fd).st_size
    end = size
    while end > 0:
        start = max(0, end - _HEADER_LIMIT)
        block = os.pread(fd, end - start, start)
        newline = block.rfind(b'\n')
        if newline >= 0:
            keep = start + newline + 1
            break
        end = start
    else:
        keep = 0
    if keep < size:
        os.ftruncate(fd, keep)
        os.fsync(fd)
    return size - keep


def _check_header(record: dict, path: str, backend: str) -> None:
    if record.get('vllm_dr_backup') not in READABLE_VERSIONS:
        raise BackupError(f'backup_path {path} has format {record.get("vllm_dr_backup")!r}, this module reads '
                          f'{", ".join(map(str, READABLE_VERSIONS))}; restore it with the collection version that wrote it')
    family = 'etcd' if backend == 'etcd' else 'redis'
    written = 'etcd' if record.get('backend') == 'etcd' else 'redis'
    if family != written:
        raise BackupError(f'backup_path {path} holds {written} sessions but backend is {backend}; '
                          f'use it with a {written} store')


# ---- reading -----------------------------------------------------------------------------------

_ENTRY_START = b'{"key"'
_BLOCK = 1024 * 1024
# bad lines named one by one (in the result and a warning each); beyond them only counted
INVALID_SAMPLES = 100


class _Run:
    __slots__ = ('line', 'version', 'entries')

    def __init__(self, line: int, version: int):
        self.line = line  # the header's line number
        self.version = version
        self.entries = 0  # entry lines (valid or not) after the header


class BackupReader:
    """The entries a backup file says were deleted, newest first, without holding the file in memory.

    Opening it reads the file once to check every run's header (a file that is not a
    backup of this kind of store is refused before anything is restored) and to number
    the entries. ``entries()`` then reads it from the end: a key deleted by several runs
    (it came back between them) is met first in the version deleted last. Lines that
    are not valid entries are counted in ``invalid`` and named (line number and
    problem, never a value) in ``invalid_samples``.
    """

    def __init__(self, path: str, backend: str):
        self.path = path
        self.invalid = 0
        self.invalid_samples = []
        self._runs = []
        self._lines = 0
        try:
            self._handle = open(path, 'rb')  # pylint: disable=consider-using-with  # closed by close()
        except OSError as exc:
            raise BackupError(f'backup_path {path} cannot be read ({exc.strerror}); give the file a sweep wrote') from None
        try:
            self._index(backend)
        except BaseException:
            self._handle.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._handle.close()

    def _index(self, backend: str) -> None:
        run = None
        for number, line in enumerate(self._handle, 1):
            self._lines = number
            if not line.strip():
                continue
            if run is not None and line.startswith(_ENTRY_START):
                run.entries += 1
                continue
            record = _json_or_none(line)
            if isinstance(record, dict) and 'vllm_dr_backup' in record:
                _check_header(record, self.path, backend)
                run = _Run(number, record['vllm_dr_backup'])
                self._runs.append(run)
            elif run is None:
                raise BackupError(f'backup_path {self.path} has no vllm_dr backup header on its first line; '
                                  'give the file a sweep wrote')
            elif not (isinstance(record, dict) and 'not_deleted' in record):
                run.entries += 1
        if run is None:
            raise BackupError(f'backup_path {self.path} is empty; give the file a sweep wrote')

    def _invalid(self, number: int, why: str) -> None:
        self.invalid += 1
        if len(self.invalid_samples) < INVALID_SAMPLES:
            self.invalid_samples.append(f'line {number}: {why}')

    def entries(self):
        """Every entry of the file that was not cancelled by a later ``not_deleted`` line of its run, newest first."""
        runs = list(self._runs)
        run = runs.pop()
        left = run.entries  # the number of the next entry met (reading backwards) in this run
        cancelled = set()  # entry numbers of this run (format 2)
        cancelled_keys = {}  # key -> how many of its nearest earlier entries to skip (format 1)
        for number, line in _lines_backwards(self._handle, self._lines):
            if number <= run.line:
                if number == run.line:
                    if not runs:
                        return
                    run = runs.pop()
                    left, cancelled, cancelled_keys = run.entries, set(), {}
                continue
            if not line.strip():
                continue
            record = _json_or_none(line)
            if isinstance(record, dict) and 'not_deleted' in record and not line.startswith(_ENTRY_START):
                self._cancel(record, run, cancelled, cancelled_keys, number)
                continue
            at, left = left, left - 1
            if record is None:
                self._invalid(number, 'not JSON (a torn last line of an interrupted write)' if number == self._lines
                              else 'not JSON')
                continue
            try:
                entry = Entry.from_record(record)
            except BackupLineError as exc:
                self._invalid(number, str(exc))
                continue
            if at in cancelled:
                continue
            if cancelled_keys.get(entry.key):
                cancelled_keys[entry.key] -= 1
                continue
            entry.number = at
            yield entry

    def _cancel(self, record: dict, run: _Run, cancelled: set, cancelled_keys: dict, number: int) -> None:
        keys, numbers = record.get('not_deleted'), record.get('entries')
        if not isinstance(keys, list):
            self._invalid(number, '"not_deleted" is not a list')
            return
        if run.version >= 2:
            if not isinstance(numbers, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
                self._invalid(number, '"entries" is not a list of entry numbers')
                return
            cancelled.update(numbers)
            return
        for key in keys:
            try:
                key = decode_bytes(key, 'a not_deleted key')
            except BackupLineError as exc:
                self._invalid(number, str(exc))
                continue
            cancelled_keys[key] = cancelled_keys.get(key, 0) + 1


def read_backup(path: str, backend: str):
    """Every entry a backup file says was deleted, newest first (a small file's convenience over BackupReader)."""
    with BackupReader(path, backend) as reader:
        return list(reader.entries())


def _json_or_none(line: bytes):
    try:
        return json.loads(line)
    except ValueError:
        return None


def _lines_backwards(handle, count: int):
    """(number, line without its newline) of every line of the file, last first; ``count``: the last line's number."""
    handle.seek(0, os.SEEK_END)
    position = handle.tell()
    number = count
    tail = None  # the start of the line that the block read before this one continues
    while position > 0:
        size = min(_BLOCK, position)
        position -= size
        handle.seek(position)
        block = handle.read(size)
        if tail is None:  # the end of the file: its last newline ends the last line
            block, tail = (block[:-1] if block.endswith(b'\n') else block), b''
        pieces = (block + tail).split(b'\n')
        tail = pieces[0]
        for line in reversed(pieces[1:]):
            yield number, line
            number -= 1
    if tail is not None:
        yield number, tail

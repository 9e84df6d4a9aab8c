# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Session backups: JSON Lines, mode 0600, every line durable before the delete it covers.

Line kinds:
  {"vllm_dr_backup": 1, "backend": ..., "created": ...}      a header, once per run
  {"key": ..., "type": "hash", "fields": {...}, ...}         an entry about to be deleted
  {"not_deleted": [key, ...]}                                entries above that a refresh kept

Keys and values are stored as text when they are UTF-8, else as {"b64": ...}: the
backup is readable with grep and still holds the exact bytes.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import base64
import concurrent.futures
import functools
import itertools
import json
import os
import threading

from ._files import BackupError, fsync_directory, PRIVATE_MODE
from ._timestamps import iso_utc

FORMAT_VERSION = 1
_chain = itertools.chain.from_iterable
# Bytes that JSON (with ensure_ascii) writes as they are: printable ASCII but the quote and the backslash.
_PLAIN = bytes(range(0x20, 0x7f)).replace(b'"', b'').replace(b'\\', b'')


class Entry:
    """One session as read from a store.

    ``kind`` is the Redis type (``hash``, ``string``, ...) or ``json`` for etcd values;
    ``fields`` holds a hash's fields, ``value`` a string's or etcd value's bytes;
    ``pexpireat`` the absolute Redis expiry in ms (None: no TTL); ``version`` etcd's
    mod_revision; ``lease`` etcd's lease id (0: none).
    """

    __slots__ = ('key', 'kind', 'fields', 'value', 'pexpireat', 'version', 'lease')

    def __init__(self, key, kind, fields=None, value=None, pexpireat=None, version=None, lease=0):
        self.key = key
        self.kind = kind
        self.fields = fields
        self.value = value
        self.pexpireat = pexpireat
        self.version = version
        self.lease = lease

    def to_line(self) -> bytes:
        """The backup line without its newline."""
        return json.dumps(self.to_record(), separators=(',', ':')).encode('utf-8')

    def to_record(self) -> dict:
        record = {'key': _encode(self.key), 'type': self.kind}
        if self.fields is not None:
            record['fields'] = {_encode_key(name): _encode(value) for name, value in self.fields.items()}
        if self.value is not None:
            record['value'] = _encode(self.value)
        self._add_metadata(record)
        return record

    def _metadata(self):
        """(name, number) pairs recorded after the content, as bytes."""
        if self.pexpireat is not None:
            yield b'pexpireat', self.pexpireat
        if self.version is not None:
            yield b'mod_revision', self.version
        if self.lease:
            yield b'lease', self.lease

    def _add_metadata(self, record: dict) -> None:
        for name, number in self._metadata():
            record[name.decode('ascii')] = number

    @classmethod
    def from_record(cls, record: dict) -> Entry:
        fields = record.get('fields')
        return cls(
            key=_decode(record['key']),
            kind=record['type'],
            fields=None if fields is None else {_decode_key(name): _decode(value) for name, value in fields.items()},
            value=None if record.get('value') is None else _decode(record['value']),
            pexpireat=record.get('pexpireat'),
            version=record.get('mod_revision'),
            lease=record.get('lease', 0),
        )


def backup_lines(entries) -> bytes:
    """The backup lines of ``entries``, each with its newline: the to_line() of each, in UTF-8.

    A sweep writes one line per deleted session, so the usual batch (hashes whose keys,
    field names and values are printable ASCII that JSON writes as they are) is
    checked once and formatted in one go, without the JSON encoder.
    """
    templates = []
    args = []
    add, add_all, add_template = args.append, args.extend, templates.append
    for entry in entries:
        fields = entry.fields
        if fields is None or entry.value is not None:
            return _encoded_lines(entries)
        add(entry.key)
        add_all(_chain(fields.items()))
        if entry.pexpireat is None and entry.version is None and not entry.lease:
            add_template(_line_template(entry.kind, len(fields), ()))
        else:
            metadata = tuple(entry._metadata())  # pylint: disable=protected-access
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


def _encode(data: bytes):
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        return {'b64': base64.b64encode(data).decode('ascii')}


def _decode(data) -> bytes:
    if isinstance(data, dict):
        return base64.b64decode(data['b64'])
    return data.encode('utf-8')


def _encode_key(name: bytes) -> str:
    """Hash field names must be JSON object keys: text, or b64: prefixed when not UTF-8."""
    try:
        text = name.decode('utf-8')
    except UnicodeDecodeError:
        return 'b64:' + base64.b64encode(name).decode('ascii')
    return 'b64:' + base64.b64encode(name).decode('ascii') if text.startswith('b64:') else text


def _decode_key(name: str) -> bytes:
    if name.startswith('b64:'):
        return base64.b64decode(name[4:])
    return name.encode('utf-8')


class BackupWriter:
    """Appends to a backup file; every line is fsynced before the write that holds it reports done. Thread-safe.

    Entries go through start_entries: a thread of its own writes them, and when more
    are queued by then (several partitions, or a slow disk), writes them together and
    fsyncs once for all of them.
    """

    def __init__(self, path: str, header: dict):
        self.path = path
        self._lock = threading.Lock()  # the file
        self._header = header
        self._handle = None
        self._queued = threading.Condition()  # the queue and the thread
        self._queue = []
        self._thread = None
        self._closing = False
        self._failed = None  # the BackupError of a failed write: every later write fails with it

    def _open(self):
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, 'O_NOFOLLOW', 0)
        try:
            fd = os.open(self.path, flags, PRIVATE_MODE)
        except OSError as exc:
            raise BackupError(f'backup_path {self.path} cannot be opened for writing ({exc.strerror}); '
                              'choose a writable location for backup_path') from None
        os.fchmod(fd, PRIVATE_MODE)
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
                                       'deleted: free space, then re-run')
            raise self._failed from None

    def write_entries(self, entries) -> None:
        """Durably record entries that are about to be deleted."""
        self.start_entries(entries).result()

    def start_entries(self, entries) -> concurrent.futures.Future:
        """Record entries that are about to be deleted; they are durable once the answer's result() returns.

        The lines are formatted here; the caller goes on (judging the next batch) while
        the backup thread writes and fsyncs them. result() raises the BackupError of a
        failed write.
        """
        payload = backup_lines(entries)
        if self._handle is None:  # only the first time: the lock is the backup thread's while it fsyncs
            with self._lock:
                if self._handle is None:
                    self._open()
        written = concurrent.futures.Future()
        with self._queued:
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

    def write_not_deleted(self, keys) -> None:
        """Record that entries written above were kept (refreshed during the sweep)."""
        if not keys:
            return
        with self._lock:
            self._write_lines([{'not_deleted': [_encode(key) for key in keys]}])

    def close(self) -> None:
        """Finish the queued writes, then close the file."""
        if self._thread is not None:
            with self._queued:
                self._closing = True
                self._queued.notify()
            self._thread.join()
            self._thread = None
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def check_writable(path: str) -> None:
    """Fail before anything is deleted when the backup cannot be written."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise BackupError(f'backup_path {path} is a directory; give a file name, e.g. {os.path.join(path, "sessions.jsonl")}')
    if not os.path.isdir(directory):
        raise BackupError(f'backup_path {path}: directory {directory} does not exist; create it or choose another backup_path')
    if not os.access(directory, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise BackupError(f'backup_path {path} is not writable; fix its permissions or choose another backup_path')


def read_backup(path: str, backend: str):
    """The entries a backup file says were deleted (kept ones left out), in file order."""
    try:
        handle = open(path, 'rb')
    except OSError as exc:
        raise BackupError(f'backup_path {path} cannot be read ({exc.strerror}); give the file a sweep wrote') from None
    entries = {}
    seen_header = False
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if 'vllm_dr_backup' in record:
                    _check_header(record, path, backend)
                    seen_header = True
                elif 'not_deleted' in record:
                    for key in record['not_deleted']:
                        entries.pop(_decode(key), None)
                else:
                    entry = Entry.from_record(record)
                    entries[entry.key] = entry
            except (ValueError, KeyError, TypeError) as exc:
                raise BackupError(f'backup_path {path} line {number} is not a session backup line ({exc}); '
                                  'give the file a sweep wrote, unedited') from None
    if not seen_header:
        raise BackupError(f'backup_path {path} has no vllm_dr backup header; give the file a sweep wrote')
    return list(entries.values())


def _check_header(record: dict, path: str, backend: str) -> None:
    if record.get('vllm_dr_backup') != FORMAT_VERSION:
        raise BackupError(f'backup_path {path} has format {record.get("vllm_dr_backup")!r}, this module reads {FORMAT_VERSION}; '
                          'restore it with the collection version that wrote it')
    family = 'etcd' if backend == 'etcd' else 'redis'
    written = 'etcd' if record.get('backend') == 'etcd' else 'redis'
    if family != written:
        raise BackupError(f'backup_path {path} holds {written} sessions but backend is {backend}; '
                          f'restore it into a {written} store')


def header(backend: str, location: str, now: float) -> dict:
    return {'backend': backend, 'store': location, 'created': iso_utc(now)}

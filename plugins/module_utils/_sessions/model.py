# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The session model every store, the sweep and the backup share: an Entry as read from a store.

An Entry's record (to_record, from_record) is what a backup line holds. Keys and values
are text when they are UTF-8, else {"b64": ...}: the record is readable with grep and
still holds the exact bytes.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import base64
import json

# The last expiry a backup line may give: 9999-12-31T23:59:59.999Z in ms. Anything later is not a date (and beyond
# 2**63 not a number a Redis server takes); such a line is skipped and named, never written without its TTL.
MAX_PEXPIREAT = 253402300799999


class Entry:
    """One session as read from a store.

    ``kind`` is the Redis type (``hash``, ``string``, ...) or ``json`` for etcd values;
    ``fields`` holds a hash's fields, ``value`` a string's or etcd value's bytes;
    ``pexpireat`` the absolute Redis expiry in ms (None: no TTL); ``version`` etcd's
    mod_revision; ``lease`` etcd's lease id (0: none); ``number`` its place among the
    entries of its run in a backup (set when it is queued for the backup).
    """

    __slots__ = ('key', 'kind', 'fields', 'value', 'pexpireat', 'version', 'lease', 'number')

    def __init__(self, key, kind, fields=None, value=None, pexpireat=None, version=None, lease=0):
        self.key = key
        self.kind = kind
        self.fields = fields
        self.value = value
        self.pexpireat = pexpireat
        self.version = version
        self.lease = lease
        self.number = None

    def to_line(self) -> bytes:
        """The backup line without its newline."""
        return json.dumps(self.to_record(), separators=(',', ':')).encode('utf-8')

    def to_record(self) -> dict:
        record = {'key': encode_bytes(self.key), 'type': self.kind}
        if self.fields is not None:
            record['fields'] = {encode_field_name(name): encode_bytes(value) for name, value in self.fields.items()}
        if self.value is not None:
            record['value'] = encode_bytes(self.value)
        self._add_metadata(record)
        return record

    def metadata(self):
        """(name, number) pairs recorded after the content, as bytes."""
        if self.pexpireat is not None:
            yield b'pexpireat', self.pexpireat
        if self.version is not None:
            yield b'mod_revision', self.version
        if self.lease:
            yield b'lease', self.lease

    def _add_metadata(self, record: dict) -> None:
        for name, number in self.metadata():
            record[name.decode('ascii')] = number

    @classmethod
    def from_record(cls, record) -> Entry:
        """The entry of a backup line; BackupLineError (naming the problem, never a value) when it is not one."""
        if not isinstance(record, dict):
            raise BackupLineError('not a JSON object')
        kind = record.get('type')
        if not isinstance(kind, str):
            raise BackupLineError('"type" is missing or not text')
        fields = record.get('fields')
        value = record.get('value')
        if kind == 'hash':
            if not isinstance(fields, dict) or not fields:
                raise BackupLineError('a hash without "fields" (a non-empty object)')
            if value is not None:
                raise BackupLineError('a hash with a "value"')
        elif fields is not None or value is None:
            raise BackupLineError(f'a {kind} entry needs "value" and no "fields"')
        numbers = {}
        for name in ('pexpireat', 'mod_revision', 'lease'):
            number = record.get(name)
            if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
                raise BackupLineError(f'"{name}" is not a whole number')
            numbers[name] = number
        if numbers['pexpireat'] is not None and not 0 <= numbers['pexpireat'] <= MAX_PEXPIREAT:
            raise BackupLineError(f'"pexpireat" is out of range (an expiry from 0 to {MAX_PEXPIREAT} ms since 1970); '
                                  'the session is not restored')
        return cls(
            key=decode_bytes(record.get('key'), 'key'),
            kind=kind,
            fields=None if fields is None else {decode_field_name(name): decode_bytes(item, 'a field value') for name, item in fields.items()},
            value=None if value is None else decode_bytes(value, 'value'),
            pexpireat=numbers['pexpireat'],
            version=numbers['mod_revision'],
            lease=numbers['lease'] or 0,
        )


class BackupLineError(ValueError):
    """A line of a backup file that is not a valid entry; the message names the problem, never a value."""


def encode_bytes(data: bytes):
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        return {'b64': base64.b64encode(data).decode('ascii')}


def decode_bytes(data, what: str = 'a value') -> bytes:
    if isinstance(data, str):
        return data.encode('utf-8')
    if isinstance(data, dict) and isinstance(data.get('b64'), str) and len(data) == 1:
        try:
            return base64.b64decode(data['b64'], validate=True)
        except ValueError:
            pass
    raise BackupLineError(f'{what} is neither text nor {{"b64": ...}}')


def encode_field_name(name: bytes) -> str:
    """Hash field names must be JSON object keys: text, or b64: prefixed when not UTF-8."""
    try:
        text = name.decode('utf-8')
    except UnicodeDecodeError:
        return 'b64:' + base64.b64encode(name).decode('ascii')
    return 'b64:' + base64.b64encode(name).decode('ascii') if text.startswith('b64:') else text


def decode_field_name(name: str) -> bytes:
    if name.startswith('b64:'):
        try:
            return base64.b64decode(name[4:], validate=True)
        except ValueError:
            raise BackupLineError('a field name after b64: is not base64') from None
    return name.encode('utf-8')

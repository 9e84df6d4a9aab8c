# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Session stores in etcd (v3 API through its JSON gateway, via the etcd3gw library).

Sessions are keys under a prefix whose values are JSON objects. Reads page
through the prefix at one pinned revision; a delete is a transaction that
compares each key's mod_revision, so a session rewritten after it was read
survives; a restore creates a key only while it does not exist.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import base64
import json
import traceback
import urllib.parse

from ._session_backup import Entry
from ._session_errors import StoreError

ETCD_IMPORT_ERROR = None
try:
    import etcd3gw
    from etcd3gw import exceptions as etcd_exceptions
except ImportError:
    ETCD_IMPORT_ERROR = traceback.format_exc()

# etcd's default --max-txn-ops; a larger transaction is refused by the server.
MAX_TXN_OPS = 128


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode('ascii')


def prefix_range_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix``."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b'\0'


def _chunks(items, size):
    for start in range(0, len(items), size):
        yield items[start:start + size]


class EtcdStore:
    """Sessions under ``key_prefix`` in an etcd cluster; the first endpoint that answers is used."""

    backend = 'etcd'

    def __init__(self, params: dict, key_prefix: str):
        if ETCD_IMPORT_ERROR:
            raise StoreError('the etcd3gw Python library is required for backend etcd; '
                             'install it on the host that runs the module: pip install etcd3gw')
        if not key_prefix:
            raise StoreError('key_prefix is empty and would match every key in etcd; give the session prefix, e.g. vllm/session/')
        self.prefix = key_prefix.encode('utf-8')
        self.params = params
        self.client, self.location = self._connect(params)

    def _connect(self, params: dict):
        errors = []
        for endpoint in params['etcd_endpoints']:
            url = urllib.parse.urlsplit(endpoint if '://' in endpoint else f'http://{endpoint}')
            if url.scheme not in ('http', 'https') or not url.hostname:
                raise StoreError(f'etcd_endpoints entry {endpoint!r} is not a URL; give e.g. https://10.0.0.5:2379')
            client = etcd3gw.Etcd3Client(
                host=url.hostname, port=url.port or 2379, protocol=url.scheme, ca_cert=params.get('ca_cert'),
                cert_key=params.get('client_key'), cert_cert=params.get('client_cert'), timeout=params['timeout'])
            try:
                self._authenticate(client, params)
                client.status()
                return client, endpoint
            except StoreError:
                raise
            except Exception as exc:  # pylint: disable=broad-except
                errors.append(f'{endpoint}: {self._text(exc)}')
        raise StoreError(f'cannot reach etcd ({"; ".join(errors)}); check etcd_endpoints, the TLS files and that etcd is up')

    @staticmethod
    def _text(exc: Exception) -> str:
        text = ' '.join(str(part) for part in getattr(exc, 'args', ()) if part) or type(exc).__name__
        return text.splitlines()[0][:300]

    def _authenticate(self, client, params: dict) -> None:
        if not params.get('etcd_user'):
            return
        try:
            reply = client.post(client.get_url('/auth/authenticate'),
                                json={'name': params['etcd_user'], 'password': params.get('etcd_password') or ''})
        except etcd_exceptions.Etcd3Exception as exc:
            text = self._text(exc)
            if 'authentication failed' in text or 'invalid' in text:
                raise StoreError(f'etcd rejected the credentials of {params["etcd_user"]!r} ({text}); '
                                 'check etcd_user and etcd_password') from None
            raise
        client.session.headers['Authorization'] = reply['token']

    def _call(self, path: str, payload: dict) -> dict:
        try:
            return self.client.post(self.client.get_url(path), json=payload)
        except Exception as exc:  # pylint: disable=broad-except
            text = self._text(exc)
            if 'permission denied' in text:
                raise StoreError(f'etcd at {self.location} denied {path} to this user ({text}); grant the user '
                                 f'readwrite on the prefix {self.prefix.decode()!r}') from None
            raise StoreError(f'etcd at {self.location} failed during {path} ({text}); '
                             'check that etcd is up and re-run (a sweep resumes where it stopped)') from None

    # ---- the partition interface (etcd is one partition) ------------------------------------

    def partitions(self):
        return [self]

    def sweep(self, job) -> None:
        job.run_in_turn(self)

    def scan_batches(self, batch_size: int):
        """Every key under the prefix, a page at a time, at the revision of the first page; the module judges each."""
        start, end, revision = self.prefix, prefix_range_end(self.prefix), None
        while True:
            payload = {'key': _b64(start), 'range_end': _b64(end), 'limit': batch_size}
            if revision is not None:
                payload['revision'] = revision
            reply = self._call('/kv/range', payload)
            revision = revision or int(reply['header']['revision'])
            kvs = reply.get('kvs', [])
            if kvs:
                yield [Entry(base64.b64decode(kv['key']), 'json', value=base64.b64decode(kv.get('value', '')),
                             version=int(kv['mod_revision']), lease=int(kv.get('lease', 0))) for kv in kvs]
            if not reply.get('more') or not kvs:
                return
            start = base64.b64decode(kvs[-1]['key']) + b'\0'

    def _txn(self, compares, successes) -> bool:
        return bool(self._call('/kv/txn', {'compare': compares, 'success': successes}).get('succeeded'))

    def delete_unchanged(self, entries, guard_fields):  # pylint: disable=unused-argument
        """Delete each entry only at the mod_revision it was read at (one transaction per chunk, per key on conflict).

        Yields (entries, [deleted?]) as each transaction answers.
        """
        for chunk in _chunks(list(entries), MAX_TXN_OPS):
            compares = [{'key': _b64(e.key), 'target': 'MOD', 'result': 'EQUAL', 'mod_revision': e.version} for e in chunk]
            deletes = [{'request_delete_range': {'key': _b64(e.key)}} for e in chunk]
            if self._txn(compares, deletes):
                yield chunk, [True] * len(chunk)
                continue
            for entry, compare, delete in zip(chunk, compares, deletes):
                yield [entry], [self._txn([compare], [delete])]

    def restore(self, entries):
        """Create each key that does not exist (create_revision 0); 1 restored, 0 exists. Leases are not restored.

        One transaction per chunk of distinct keys; when one of them exists again, the chunk's
        keys are created one by one.
        """
        results = []
        for chunk in _chunks(list(entries), MAX_TXN_OPS):
            compares = [{'key': _b64(e.key), 'target': 'CREATE', 'result': 'EQUAL', 'create_revision': 0} for e in chunk]
            puts = [{'request_put': {'key': _b64(e.key), 'value': _b64(e.value)}} for e in chunk]
            if len({e.key for e in chunk}) == len(chunk) and self._txn(compares, puts):
                results.extend([1] * len(chunk))
                continue
            results.extend(1 if self._txn([compare], [put]) else 0 for compare, put in zip(compares, puts))
        return results

    def would_restore(self, entries):
        """What restore() would answer, without writing: 1 absent, 0 exists."""
        return [0 if int(self._call('/kv/range', {'key': _b64(entry.key), 'count_only': True}).get('count', 0)) else 1
                for entry in entries]

    def restore_partition_for(self, entries):
        return [(self, list(entries))]

    def _read_session(self, session_id: str):
        key = self.prefix + session_id.encode('utf-8')
        kvs = self._call('/kv/range', {'key': _b64(key)}).get('kvs', [])
        if not kvs:
            return key, None, None
        return key, base64.b64decode(kvs[0].get('value', '')), int(kvs[0]['mod_revision'])

    def get_session(self, session_id: str):
        """The fields of one session (its JSON object, as bytes), or None."""
        _key, value, _revision = self._read_session(session_id)
        if value is None:
            return None
        try:
            document = json.loads(value)
        except ValueError:
            raise StoreError(f'session {session_id} is not a JSON object; check session_id and key_prefix') from None
        if not isinstance(document, dict):
            raise StoreError(f'session {session_id} is not a JSON object; check session_id and key_prefix')
        return {str(k).encode(): (v if isinstance(v, str) else json.dumps(v)).encode() for k, v in document.items()}

    def swap_tokens(self, session_id: str, expected_refresh: bytes, fields: dict) -> str:
        """Compare-and-set on mod_revision; 'written', 'already' or 'conflict' as for Redis."""
        key, value, revision = self._read_session(session_id)
        document = json.loads(value) if value else {}
        current = str(document.get('refresh_token', '')).encode()
        if current == fields[b'refresh_token']:
            return 'already'
        if current != expected_refresh:
            return 'conflict'
        document.update({k.decode(): v.decode() for k, v in fields.items()})
        written = self._txn([{'key': _b64(key), 'target': 'MOD', 'result': 'EQUAL', 'mod_revision': revision}],
                            [{'request_put': {'key': _b64(key), 'value': _b64(json.dumps(document).encode())}}])
        return 'written' if written else 'conflict'

    def accepts(self, entry) -> bool:
        """Whether a backup entry is one a sweep of this store could have written: a JSON value under the prefix."""
        return entry.kind == 'json' and entry.key.startswith(self.prefix) and len(entry.key) > len(self.prefix)

    def session_id(self, key: bytes) -> str:
        return key[len(self.prefix):].decode('utf-8', 'replace')

    def close(self) -> None:
        self.client.session.close()

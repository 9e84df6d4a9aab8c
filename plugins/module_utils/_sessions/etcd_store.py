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
import collections
import contextlib
import json
import traceback

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.model import Entry
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError, classify_etcd_error
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import parse_etcd_endpoint
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep_pipeline import EntryBatch, Partition
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.permissions import judge_etcd, unchecked

ETCD_IMPORT_ERROR = None
try:
    import etcd3gw
    import requests
except ImportError:
    ETCD_IMPORT_ERROR = traceback.format_exc()
    requests = None

# etcd's default --max-txn-ops; a larger transaction is refused by the server.
MAX_TXN_OPS = 128


def _tls_session(params: dict):
    """The HTTP session of the etcd client, with the etcd_ TLS options.

    requests lets REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE in the environment replace a session's own CA bundle, so an
    execution environment that sets them would silently ignore etcd_ca_cert; the bundle given here wins. A client
    certificate whose file also holds its key needs no etcd_client_key.
    """
    class PinnedCaSession(requests.Session):
        def merge_environment_settings(self, url, proxies, stream, verify, cert):
            if verify is None and self.verify is not True:
                verify = self.verify
            return super().merge_environment_settings(url, proxies, stream, verify, cert)

    session = PinnedCaSession()
    if params.get('etcd_ca_cert'):
        session.verify = params['etcd_ca_cert']
    if params.get('etcd_client_cert'):
        key = params.get('etcd_client_key')
        session.cert = (params['etcd_client_cert'], key) if key else params['etcd_client_cert']
    return session


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


# Failures of one endpoint; the next endpoint is tried.
_PER_ENDPOINT = ('unreachable', 'timeout', 'unavailable', 'tls_verify', 'tls_handshake', 'not_etcd')

# Answers that say the request was refused as a whole: it changed nothing.
_REFUSED = ('invalid', 'denied', 'precondition', 'compacted', 'unauthenticated')

_OPERATIONS = {'/kv/range': 'reading', '/kv/txn': 'deleting or writing', '/kv/put': 'writing'}


class _SweepState:
    """Where a sweep of the prefix is: the next page's first key (None after the last page), the pinned revision."""

    def __init__(self, batch_size: int, guard_fields, prefix: bytes):
        self.batch_size = batch_size
        self.guard_fields = guard_fields
        self.start = prefix
        self.revision = None
        self.deletes = collections.deque()  # _Delete, oldest first


class _Delete:
    """A delete's victims, the (part, outcome) answers of its transactions so far, and the error that stopped it."""

    def __init__(self, victims):
        self.victims = victims
        self.answered = []
        self.failure = None


def describe_failure(kind: str, text: str, path: str, location, params: dict, own_prefix: bytes,
                     prefix: str | None = None, need: str | None = None) -> str:
    """One line for a failure of the call ``path`` to etcd at ``location``: what happened and which option fixes it.

    ``prefix`` and ``need`` name the keys the call is for and the permission they take there, when they are not
    the sessions' (``own_prefix``; the run lock's keys)."""
    at = f'etcd at {location}'
    user = params.get('etcd_user')
    own = own_prefix.decode('utf-8', 'replace')
    if kind == 'denied':
        prefix = prefix or own
        need = need or ('read' if path == '/kv/range' else 'readwrite')
        fix = 'or fix etcd_user' if prefix != own else 'or fix etcd_user or key_prefix'
        return (f'{at} denied {_OPERATIONS.get(path, path)} under the prefix {prefix!r} to user {user!r} ({text}); '
                f'grant its role {need} on that prefix (etcdctl role grant-permission ROLE --prefix {need} {prefix}), '
                f'{fix}')
    if kind == 'invalid' and not user:
        return f'{at} requires authentication ({text}); set etcd_user and etcd_password'
    if kind == 'unauthenticated':
        return f'{at} no longer accepts the login of {user!r} ({text}); check etcd_user and etcd_password, then re-run'
    if kind == 'compacted':
        return (f'{at}: the revision the sweep reads at was compacted meanwhile ({text}); '
                're-run (a sweep resumes with the sessions left)')
    if kind == 'tls_verify':
        return f'TLS with {at} failed: the server certificate is not trusted ({text}); check etcd_ca_cert'
    if kind == 'tls_handshake':
        return (f'TLS with {at} failed: the server ended the handshake ({text}); it may require a client '
                'certificate: set etcd_client_cert and etcd_client_key')
    if kind == 'not_etcd':
        return f'{at} does not answer as the etcd v3 JSON API ({text}); check etcd_endpoints'
    return (f'{at} failed during {path} ({text}); check that etcd is up and healthy and re-run '
            '(a sweep resumes where it stopped)')


class EtcdClient:
    """The v3 JSON API of an etcd cluster through the first endpoint that answers; a failed call is a one-line StoreError.

    ``prefix`` is the sessions' key prefix: the connection proves the user may read it.
    """

    def __init__(self, params: dict, prefix: bytes):
        self.params = params
        self.prefix = prefix
        self.location = None
        self.http, self.location = self._connect(params)

    def _connect(self, params: dict):
        errors = []
        for endpoint in params['etcd_endpoints']:
            scheme, host, port = parse_etcd_endpoint(endpoint)
            client = etcd3gw.Etcd3Client(host=host, port=port, protocol=scheme, timeout=params['timeout'])
            client.session = _tls_session(params)
            self.location = endpoint
            try:
                self._authenticate(client, params)
                # one key of the prefix: proves the user may read it, before anything else happens
                client.post(client.get_url('/kv/range'), json={
                    'key': _b64(self.prefix), 'range_end': _b64(prefix_range_end(self.prefix)), 'limit': 1,
                    'keys_only': True})
                return client, endpoint
            except StoreError:
                raise
            except Exception as exc:  # pylint: disable=broad-except  # classified below; the rest is one line
                kind, text = classify_etcd_error(exc)
                if kind not in _PER_ENDPOINT:
                    raise StoreError(describe_failure(kind, text, '/kv/range', self.location, params, self.prefix)) from None
                errors.append(f'{endpoint}: {text}')
        raise StoreError(f'cannot reach etcd ({"; ".join(errors)}); check etcd_endpoints, the TLS files '
                         '(etcd_ca_cert, etcd_client_cert, etcd_client_key) and that etcd is up')

    def _authenticate(self, client, params: dict) -> None:
        if not params.get('etcd_user'):
            return
        try:
            reply = client.post(client.get_url('/auth/authenticate'),
                                json={'name': params['etcd_user'], 'password': params.get('etcd_password') or ''})
        except Exception as exc:  # pylint: disable=broad-except  # classified below
            kind, text = classify_etcd_error(exc)
            if kind == 'invalid':
                raise StoreError(f'etcd at {self.location} rejected the credentials of {params["etcd_user"]!r} ({text}); '
                                 'check etcd_user and etcd_password') from None
            if kind == 'precondition':
                raise StoreError(f'etcd at {self.location} has authentication turned off ({text}); '
                                 'remove etcd_user and etcd_password') from None
            raise
        client.session.headers['Authorization'] = reply['token']

    def call(self, path: str, payload: dict, prefix: str | None = None, need: str | None = None) -> dict:
        try:
            return self.http.post(self.http.get_url(path), json=payload)
        except Exception as exc:  # pylint: disable=broad-except  # classified; the message is one line
            kind, text = classify_etcd_error(exc)
            raise StoreError(describe_failure(kind, text, path, self.location, self.params, self.prefix, prefix, need),
                             refused=kind in _REFUSED) from None

    def txn(self, compares, successes) -> bool:
        """Whether a transaction of ``compares`` held (and ran ``successes``)."""
        return bool(self.call('/kv/txn', {'compare': compares, 'success': successes}).get('succeeded'))

    def identify(self) -> dict:
        """{'name': 'etcd', 'version'}: the version the endpoint's member reports (None when it may not say)."""
        try:
            version = self.call('/maintenance/status', {}).get('version')
        except StoreError:
            version = None
        return {'name': 'etcd', 'version': version}

    def permissions(self) -> dict:
        """Whether the user may delete and write under the prefix, asked without changing anything: a transaction
        whose comparison never holds (a version of -1) and whose other branch deletes the prefix. etcd checks the
        permissions of every branch before it runs one, so a user without readwrite is refused, and nothing is
        ever deleted."""
        payload = {
            'compare': [{'key': _b64(self.prefix), 'result': 'EQUAL', 'target': 'VERSION', 'version': '-1'}],
            'success': [{'requestDeleteRange': {'key': _b64(self.prefix), 'range_end': _b64(prefix_range_end(self.prefix))}}],
            'failure': [],
        }
        prefix = self.prefix.decode('utf-8', 'replace')
        try:
            self.http.post(self.http.get_url('/kv/txn'), json=payload)
        except Exception as exc:  # pylint: disable=broad-except  # classified below
            kind, text = classify_etcd_error(exc)
            if kind != 'denied':
                return unchecked(f'the probing transaction failed ({text})')
            return judge_etcd(self.params.get('etcd_user'), prefix, allowed=False)
        return judge_etcd(self.params.get('etcd_user'), prefix, allowed=True)

    def close(self) -> None:
        self.http.session.close()


class EtcdPartition(Partition):
    """The sessions under the prefix as the sweep pipeline's one partition (sweep_pipeline.Partition): pages read at
    one revision, deletes and restores that each hold only for the revision they were judged at."""

    def __init__(self, etcd: EtcdClient, prefix: bytes):
        self.etcd = etcd
        self.prefix = prefix
        self.location = etcd.location
        self._sweep = None

    def _call(self, path: str, payload: dict) -> dict:
        """A call for the sessions (the one way the sweep and the restore read and write them)."""
        return self.etcd.call(path, payload)

    @contextlib.contextmanager
    def open(self, job):
        """A sweep reads every key under the prefix, a page at a time, at the revision of the first page."""
        self._sweep = _SweepState(job.options.batch_size, job.options.guard_fields, self.prefix)
        try:
            yield
        finally:
            self._sweep = None

    @property
    def reading(self) -> bool:
        return self._sweep.start is not None

    def next_batch(self):
        """The next page of keys under the prefix, read at the revision of the first page; None after the last."""
        sweep = self._sweep
        if sweep.start is None:
            return None
        payload = {'key': _b64(sweep.start), 'range_end': _b64(prefix_range_end(self.prefix)), 'limit': sweep.batch_size}
        if sweep.revision is not None:
            payload['revision'] = sweep.revision
        reply = self._call('/kv/range', payload)
        sweep.revision = sweep.revision or int(reply['header']['revision'])
        kvs = reply.get('kvs', [])
        sweep.start = base64.b64decode(kvs[-1]['key']) + b'\0' if reply.get('more') and kvs else None
        return EntryBatch([Entry(base64.b64decode(kv['key']), 'json', value=base64.b64decode(kv.get('value', '')),
                                 version=int(kv['mod_revision']), lease=int(kv.get('lease', 0))) for kv in kvs])

    def send_delete(self, victims) -> None:
        """Run the delete's transactions now (delete_unchanged); settle_oldest counts what they answered.

        A failed transaction stops the sweep at once; what the ones before it did is counted
        when the pipeline settles this delete.
        """
        delete = _Delete(victims)
        self._sweep.deletes.append(delete)
        try:
            for part, outcome in self.delete_unchanged(victims, self._sweep.guard_fields):
                delete.answered.append((part, outcome))
        except StoreError as exc:
            delete.failure = exc
            raise

    @property
    def deletes_in_flight(self) -> int:
        return len(self._sweep.deletes)

    def settle_oldest(self, job) -> None:
        """Count what the oldest delete's transactions did; when one was refused, the victims not answered were kept."""
        delete = self._sweep.deletes.popleft()
        settled = 0
        for part, outcome in delete.answered:
            job.settle(part, outcome)
            settled += len(part)
        if delete.failure is not None and delete.failure.refused:  # it changed nothing, and the rest were never sent
            job.abandon(delete.victims[settled:])

    def delete_unchanged(self, entries, guard_fields):  # pylint: disable=unused-argument
        """Delete each entry only at the mod_revision it was read at (one transaction per chunk, per key on conflict).

        Yields (entries, [deleted?]) as each transaction answers.
        """
        for chunk in _chunks(list(entries), MAX_TXN_OPS):
            compares = [{'key': _b64(e.key), 'target': 'MOD', 'result': 'EQUAL', 'mod_revision': e.version} for e in chunk]
            deletes = [{'request_delete_range': {'key': _b64(e.key)}} for e in chunk]
            if self.etcd.txn(compares, deletes):
                yield chunk, [True] * len(chunk)
                continue
            for entry, compare, delete in zip(chunk, compares, deletes):
                yield [entry], [self.etcd.txn([compare], [delete])]

    def restore(self, entries):
        """Create each key that does not exist (create_revision 0); 1 restored, 0 exists. Leases are not restored.

        One transaction per chunk of distinct keys; when one of them exists again, the chunk's
        keys are created one by one.
        """
        results = []
        for chunk in _chunks(list(entries), MAX_TXN_OPS):
            compares = [{'key': _b64(e.key), 'target': 'CREATE', 'result': 'EQUAL', 'create_revision': 0} for e in chunk]
            puts = [{'request_put': {'key': _b64(e.key), 'value': _b64(e.value)}} for e in chunk]
            if len({e.key for e in chunk}) == len(chunk) and self.etcd.txn(compares, puts):
                results.extend([1] * len(chunk))
                continue
            results.extend(1 if self.etcd.txn([compare], [put]) else 0 for compare, put in zip(compares, puts))
        return results

    def would_restore(self, entries):
        """What restore() would answer, without writing: 1 absent, 0 exists."""
        return [0 if int(self._call('/kv/range', {'key': _b64(entry.key), 'count_only': True}).get('count', 0)) else 1
                for entry in entries]


class EtcdStore:
    """Sessions under ``key_prefix`` in an etcd cluster (EtcdClient: the first endpoint that answers), one partition."""

    backend = 'etcd'

    def __init__(self, params: dict, key_prefix: str):
        if ETCD_IMPORT_ERROR:
            raise StoreError('the etcd3gw Python library is required for backend etcd; '
                             'install it on the host that runs the module: pip install etcd3gw')
        if not key_prefix:
            raise StoreError('key_prefix is empty and would match every key in etcd; give the session prefix, e.g. vllm/session/')
        self.prefix = key_prefix.encode('utf-8')
        self.etcd = EtcdClient(params, self.prefix)
        self.location = self.etcd.location
        self.server = self.etcd.identify()
        self.partition = EtcdPartition(self.etcd, self.prefix)

    def call(self, path: str, payload: dict, prefix: str | None = None, need: str | None = None) -> dict:
        """One call to the v3 JSON API (the run lock's, _run_lock.py, with its own ``prefix`` and the permission it
        ``need``s there); a failure is a one-line StoreError."""
        return self.etcd.call(path, payload, prefix, need)

    def permissions(self) -> dict:
        return self.etcd.permissions()

    def partitions(self):
        return [self.partition]

    def group_by_partition(self, entries):
        """(partition, entries) pairs: etcd is one partition, it takes them all."""
        return [(self.partition, list(entries))]

    def _read_session(self, session_id: str):
        key = self.prefix + session_id.encode('utf-8')
        kvs = self.etcd.call('/kv/range', {'key': _b64(key)}).get('kvs', [])
        if not kvs:
            return key, None, None
        return key, base64.b64decode(kvs[0].get('value', '')), int(kvs[0]['mod_revision'])

    def get_session(self, session_id: str):
        """The fields of one session (its JSON object, as bytes), or None."""
        _key, value, _revision = self._read_session(session_id)
        return None if value is None else session_document_fields(value, session_id)

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
        written = self.etcd.txn([{'key': _b64(key), 'target': 'MOD', 'result': 'EQUAL', 'mod_revision': revision}],
                                [{'request_put': {'key': _b64(key), 'value': _b64(json.dumps(document).encode())}}])
        return 'written' if written else 'conflict'

    def accepts(self, entry) -> bool:
        """Whether a backup entry is one a sweep of this store could have written: a JSON value under the prefix."""
        return entry.kind == 'json' and entry.key.startswith(self.prefix) and len(entry.key) > len(self.prefix)

    def session_id(self, key: bytes) -> str:
        return key[len(self.prefix):].decode('utf-8', 'replace')

    def close(self) -> None:
        self.etcd.close()


def session_document_fields(value: bytes, session_id: str) -> dict:
    """The fields of a session's JSON object, as bytes; a value that is not one is refused in one line."""
    try:
        document = json.loads(value)
    except ValueError:
        raise StoreError(f'session {session_id} is not a JSON object; check session_id and key_prefix') from None
    if not isinstance(document, dict):
        raise StoreError(f'session {session_id} is not a JSON object; check session_id and key_prefix')
    return {str(k).encode(): (v if isinstance(v, str) else json.dumps(v)).encode() for k, v in document.items()}

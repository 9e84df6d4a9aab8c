# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The run lock: one recovery run at a time per target.

A lock has an owner (the run's identity), the moment it was taken and a duration after
which it expires, so that the lock of a run that crashed frees itself. Three places keep it:

- Redis: a string key set with ``SET NX PX``; renewed, taken over and released by one
  compare-and-set script, so only the value that was read is ever replaced or deleted.
- etcd: a key bound to an etcd lease, created by a transaction that requires the key to
  be absent (create_revision 0); replaced or deleted only at the mod_revision read.
- Kubernetes: a ``coordination.k8s.io/v1`` Lease, created (409: someone holds it), taken
  over and renewed by a replace guarded by its resourceVersion, deleted with that
  resourceVersion as precondition.

A run renews its lock before each of its changes (``hold``): the renewal is also the check that it still holds
it, so a run whose lock expired or was taken by force stops before its next change. The moment of the last renewal
tells a run still working from a dead one: ``vllm_dr_force_unlock`` takes only a lock not renewed for
``stale_after`` seconds, unless the operator names its holder.

``acquire``, ``hold`` and ``release`` hold the decisions; the backends only read, create, replace and delete.
Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import base64
import datetime
import json
import re
import traceback

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError, server_words
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_script import RedisScript

KUBERNETES_IMPORT_ERROR = None
try:
    from kubernetes import client as kube_client
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
    from urllib3.exceptions import HTTPError as Urllib3Error
except ImportError:
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()

REDIS_KEY_PREFIX = 'vllm_dr:lock:'
ETCD_KEY_PREFIX = 'vllm_dr/lock/'
FORCE_OPTION = 'vllm_dr_force_unlock=true'
FORCE_HOLDER_OPTION = 'vllm_dr_force_unlock_holder'


class LockHeld(StoreError):
    """The lock is held by another run; the message is the one line the operator reads."""

    def __init__(self, where: str, holder: 'Holder', now: float):
        self.where, self.holder = where, holder
        super().__init__(refusal(where, holder, now), refused=True)


class LockLost(StoreError):
    """This run no longer holds its lock (expired, or taken by another run): it must not change anything more."""


class Holder:
    """Who holds a lock, since when, last renewed when, until when (epoch seconds), and the backend's version of it."""

    def __init__(self, owner: str, acquired_at: float, expires_at: float, version=None, renewed_at=None):
        self.owner, self.acquired_at, self.expires_at, self.version = owner, acquired_at, expires_at, version
        self.renewed_at = acquired_at if renewed_at is None else renewed_at

    def expired(self, now: float) -> bool:
        return self.expires_at <= now

    def renewing(self, now: float, stale_after: int) -> bool:
        """Whether its run still renews it: renewed less than ``stale_after`` seconds ago."""
        return now - self.renewed_at < stale_after

    def as_dict(self) -> dict:
        return {'owner': self.owner, 'acquired_at': iso(self.acquired_at), 'expires_at': iso(self.expires_at)}


def iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def refusal(where: str, holder: Holder, now: float) -> str:
    left = max(0, int(holder.expires_at - now + 0.999))
    return (f'{where} is held by {holder.owner} since {iso(holder.acquired_at)}, until {iso(holder.expires_at)} '
            f'(expires in {left} s): another recovery run is working on this target; wait for it to end, or, if '
            f'that run is dead, wait until the lock expires or re-run with {FORCE_OPTION}')


def live_refusal(where: str, holder: Holder, now: float, stale_after: int) -> str:
    ago = max(0, int(now - holder.renewed_at))
    return (f'{where} is held by {holder.owner}, which renewed it {ago} s ago (taken {iso(holder.acquired_at)}): that '
            f'run is still working, so {FORCE_OPTION} does not take its lock (a holder counts as dead once it has not '
            f'renewed for {stale_after} s); wait for it to end, or, to stop it before its next change, re-run with '
            f'{FORCE_OPTION} and {FORCE_HOLDER_OPTION}="{holder.owner}"')


def lost(where: str, owner: str, current, before: str, now: float) -> str:
    if current is None:
        why = 'it expired (no renewal within its duration) and nobody holds it now'
    else:
        why = f'{current.owner} took it at {iso(current.acquired_at)}'
    step = f' ({before})' if before else ''
    return (f'{where} is no longer held by this run ({owner}): {why}; stopped before the next change{step} so that two '
            'runs never change the target at once; check what the other run did, then re-run')


def check_duration(duration: int) -> None:
    if not 1 <= duration <= 86400:
        raise StoreError(f'duration {duration} is out of range; give the seconds the lock lasts without renewal, '
                         '1 to 86400, longer than the whole run (default 1800)')


def _forcible(backend, current: Holder, now: float, stale_after: int, force_holder: str) -> None:
    """Refuse to force the lock of a run that still renews it, unless the operator named that run."""
    if current.renewing(now, stale_after) and force_holder != current.owner:
        raise StoreError(live_refusal(backend.where, current, now, stale_after), refused=True)


def acquire(backend, owner: str, duration: int, now: float, force: bool = False, check_mode: bool = False,
            stale_after: int = 600, force_holder: str = '') -> dict:
    """Take the lock for ``owner``, renew it when ``owner`` holds it already, or refuse with LockHeld.

    An expired lock is taken over; with ``force``, a lock another run holds is too (its holder is returned) when
    that run stopped renewing it, or when ``force_holder`` names it. The backend is first checked to be able to
    give the lock back (``can_release``), so no lock is taken that could not be released. Each change is
    conditional on the version read, so two runs can never both take one lock.
    """
    backend.can_release()
    current = backend.read()
    try:
        if current is None:
            if not check_mode:
                backend.create(owner, duration, now)
            return _outcome('acquired', None, backend, owner, now, duration)
        if current.owner == owner:
            if not check_mode:
                backend.replace(current, owner, duration, now, current.acquired_at)
            return _outcome('renewed', None, backend, owner, now, duration, since=current.acquired_at)
        if not (force or current.expired(now)):
            raise LockHeld(backend.where, current, now)
        if not current.expired(now):
            _forcible(backend, current, now, stale_after, force_holder)
        if not check_mode:
            backend.replace(current, owner, duration, now, now)
        return _outcome('taken_over', current, backend, owner, now, duration)
    except LockHeld as exc:
        # another host of the same run (hosts sharing one store, in parallel) took it first: it is this run's
        if exc.holder.owner != owner:
            raise
        return _outcome('renewed', None, backend, owner, now, duration, since=exc.holder.acquired_at)


def _outcome(action, previous, backend, owner, now, duration, since=None) -> dict:
    return {'action': action, 'lock': backend.where,
            'holder': Holder(owner, since or now, now + duration).as_dict(),
            'previous_holder': previous.as_dict() if previous else None}


def hold(backend, owner: str, duration: int, now: float, before: str = '', check_mode: bool = False) -> dict:
    """Renew the lock ``owner`` holds, before a change; LockLost when it no longer does (expired, or taken)."""
    current = backend.read()
    if current is None or current.owner != owner:
        raise LockLost(lost(backend.where, owner, current, before, now), refused=True)
    if not check_mode:
        try:
            backend.replace(current, owner, duration, now, current.acquired_at)
        except (LockHeld, StoreError):
            # it changed between the read and the renewal: renewed by another host of this run (hosts sharing one
            # store renew it in parallel), or expired, or taken by another run meanwhile
            newer = backend.read()
            if newer is not None and newer.owner == owner:
                return _outcome('renewed', None, backend, owner, now, duration, since=newer.acquired_at)
            raise LockLost(lost(backend.where, owner, newer, before, now), refused=True) from None
    return _outcome('renewed', None, backend, owner, now, duration, since=current.acquired_at)


def release(backend, owner: str, now: float, force: bool = False, check_mode: bool = False,
            stale_after: int = 600, force_holder: str = '') -> dict:
    """Remove the lock if ``owner`` holds it (or another run's, with ``force``, as ``acquire`` forces it);
    a lock another run holds is left alone."""
    current = backend.read()
    if current is None:
        return {'action': 'absent', 'lock': backend.where, 'holder': None, 'previous_holder': None}
    if current.owner != owner and not force:
        return {'action': 'held_by_other', 'lock': backend.where, 'holder': current.as_dict(), 'previous_holder': None}
    if current.owner != owner and not current.expired(now):
        _forcible(backend, current, now, stale_after, force_holder)
    if not check_mode:
        backend.delete(current)
    return {'action': 'released', 'lock': backend.where, 'holder': None, 'previous_holder': current.as_dict()}


def _record(owner: str, acquired_at: float, renewed_at: float) -> bytes:
    return json.dumps({'holder': owner, 'acquired_at': acquired_at, 'renewed_at': renewed_at}, sort_keys=True).encode()


def _parse_record(raw: bytes, where: str):
    """(owner, acquired_at, renewed_at) of a stored lock value; a value no run lock wrote is refused, not overwritten.

    A value written before the renewal time was recorded counts as renewed when it was taken."""
    try:
        document = json.loads(raw)
        acquired_at = float(document['acquired_at'])
        return str(document['holder']), acquired_at, float(document.get('renewed_at', acquired_at))
    except (ValueError, TypeError, KeyError, AttributeError):
        raise StoreError(f'{where} holds a value that is not a run lock; check the lock name, '
                         'or delete that key if nothing else uses it') from None


def _lost_race(backend, now: float):
    """The lock changed between the read and the write: another run got there first."""
    holder = backend.read()
    if holder is None:
        return StoreError(f'{backend.where} changed while it was taken; re-run')
    return LockHeld(backend.where, holder, now)


# ---- Redis ------------------------------------------------------------------------------------

# KEYS[1] the lock; ARGV: the value read, then the new value and its lifetime in ms (an empty new value deletes).
# The key is changed only while it still holds the value read: the owner's check and the write are one step.
COMPARE_AND_SET_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('UNLINK', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 1
"""
_COMPARE_AND_SET = RedisScript(COMPARE_AND_SET_SCRIPT)


class RedisLock:
    """A run lock as a Redis string key; ``client`` is a redis-py client (standalone, Sentinel primary or cluster)."""

    def __init__(self, client, name: str, describe):
        self.client = client
        self.key = (REDIS_KEY_PREFIX + name).encode('utf-8')
        self.where = f'the run lock {self.key.decode()} in Redis'
        self._describe = describe

    def _guarded(self, action):
        import redis  # pylint: disable=import-outside-toplevel  # present: the store was opened with it
        try:
            return action()
        except redis.RedisError as exc:
            raise StoreError(self._describe(exc)) from None

    def read(self):
        def get():
            pipe = self.client.pipeline(transaction=False)
            pipe.get(self.key)
            pipe.pttl(self.key)
            return pipe.execute()
        # The time-to-live counts from when the server answered, which is after this moment: the expiry is taken from
        # the moment the read was sent, so a slow answer never makes the lock look held longer than its TTL.
        asked_at = current_time()
        raw, ttl_ms = self._guarded(get)
        if raw is None or ttl_ms == -2:  # -2: it expired between the two reads
            return None
        owner, acquired_at, renewed_at = _parse_record(raw, self.where)
        expires_at = asked_at + ttl_ms / 1000.0 if ttl_ms >= 0 else float('inf')
        return Holder(owner, acquired_at, expires_at, version=raw, renewed_at=renewed_at)

    def can_release(self) -> None:
        """Run the compare-and-set script once, with a value no lock holds (it changes nothing): a server where
        EVALSHA or SCRIPT is renamed away (rename-command) or denied (ACL) is refused before the lock is taken with
        SET NX, since that lock could then be neither renewed, released nor forced."""
        import redis  # pylint: disable=import-outside-toplevel  # present: the store was opened with it
        try:
            _COMPARE_AND_SET.call(self.client, [self.key], [b'\0not a lock value', '', 0])
        except redis.ResponseError as exc:
            denied = isinstance(exc, redis.exceptions.NoPermissionError)
            raise StoreError(script_refusal(self.where, str(exc), denied), refused=True) from None
        except redis.RedisError as exc:
            raise StoreError(self._describe(exc)) from None

    def create(self, owner: str, duration: int, now: float) -> None:
        record = _record(owner, now, now)
        if not self._guarded(lambda: self.client.set(self.key, record, nx=True, px=duration * 1000)):
            raise _lost_race(self, now)

    def replace(self, current: Holder, owner: str, duration: int, now: float, acquired_at: float) -> None:
        done = self._guarded(lambda: _COMPARE_AND_SET.call(
            self.client, [self.key], [current.version, _record(owner, acquired_at, now), duration * 1000]))
        if not done:
            raise _lost_race(self, now)

    def delete(self, current: Holder) -> None:
        # 0: it changed meanwhile (expired, taken over): no longer this run's to delete
        self._guarded(lambda: _COMPARE_AND_SET.call(self.client, [self.key], [current.version, '', 0]))


def script_refusal(where: str, text: str, denied: bool) -> str:
    """One line for a server that cannot run the lock's compare-and-set script: the command it refused, the fix."""
    words = server_words(text)
    command = re.search(r"(?:unknown command|permissions to run the)\s+[`'\"]?([A-Za-z|]+)", text)
    name = command.group(1).upper() if command else 'EVALSHA'
    if denied:
        fix = ('grant it to the store user (ACL SETUSER <user> +evalsha +script|load), or give login_user a user '
               'that has it')
    else:
        fix = (f'remove the rename-command line for {name} from the Redis configuration (EVALSHA and SCRIPT must '
               'both keep their names) and restart Redis')
    return (f'{where} cannot be taken: the Redis server refused {name} ({words}); the lock is renewed, released and '
            f'forced only through EVALSHA and SCRIPT LOAD, so it is not taken with SET NX alone and nothing was '
            f'changed; {fix}, then re-run')


def current_time() -> float:
    return datetime.datetime.now(datetime.timezone.utc).timestamp()


# ---- etcd -------------------------------------------------------------------------------------

def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode('ascii')


class EtcdLock:
    """A run lock as an etcd key bound to an etcd lease; ``call(path, payload)`` posts to the v3 JSON API."""

    def __init__(self, call, name: str):
        self.call = call
        self.key = (ETCD_KEY_PREFIX + name).encode('utf-8')
        self.where = f'the run lock {self.key.decode()} in etcd'

    def read(self):
        kvs = self.call('/kv/range', {'key': _b64(self.key)}).get('kvs', [])
        if not kvs:
            return None
        owner, acquired_at, renewed_at = _parse_record(base64.b64decode(kvs[0].get('value', '')), self.where)
        lease = int(kvs[0].get('lease', 0))
        expires_at = float('inf')
        if lease:
            asked_at = current_time()  # as for Redis: the TTL counts from the answer, after this moment
            ttl = int(self.call('/lease/timetolive', {'ID': lease}).get('TTL', -1))
            expires_at = asked_at + max(ttl, 0)
        return Holder(owner, acquired_at, expires_at, version=(int(kvs[0]['mod_revision']), lease),
                      renewed_at=renewed_at)

    def can_release(self) -> None:
        """Every etcd call the lock takes also gives it back (a transaction, a lease): nothing more to check."""

    def _grant(self, duration: int) -> int:
        return int(self.call('/lease/grant', {'TTL': duration})['ID'])

    def _revoke(self, lease: int) -> None:
        if lease:
            try:
                self.call('/lease/revoke', {'ID': lease})
            except StoreError:
                pass  # a lease already gone (expired) frees nothing more

    def _put_if(self, compare: dict, owner: str, acquired_at: float, duration: int, now: float) -> None:
        lease = self._grant(duration)
        put = {'request_put': {'key': _b64(self.key), 'value': _b64(_record(owner, acquired_at, now)), 'lease': lease}}
        reply = self.call('/kv/txn', {'compare': [dict(compare, key=_b64(self.key))], 'success': [put]})
        if not reply.get('succeeded'):
            self._revoke(lease)
            raise _lost_race(self, now)

    def create(self, owner: str, duration: int, now: float) -> None:
        self._put_if({'target': 'CREATE', 'result': 'EQUAL', 'create_revision': 0}, owner, now, duration, now)

    def replace(self, current: Holder, owner: str, duration: int, now: float, acquired_at: float) -> None:
        revision, lease = current.version
        self._put_if({'target': 'MOD', 'result': 'EQUAL', 'mod_revision': revision}, owner, acquired_at, duration, now)
        self._revoke(lease)

    def delete(self, current: Holder) -> None:
        revision, lease = current.version
        reply = self.call('/kv/txn', {
            'compare': [{'key': _b64(self.key), 'target': 'MOD', 'result': 'EQUAL', 'mod_revision': revision}],
            'success': [{'request_delete_range': {'key': _b64(self.key)}}]})
        if reply.get('succeeded'):
            self._revoke(lease)


# ---- Kubernetes -------------------------------------------------------------------------------

def _micro_time(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def kube_api_client(auth: dict):
    """A kubernetes ApiClient from kubernetes.core's connection options (vllm_dr_k8s_auth), made by kubernetes.core's
    own client (get_api_client), as for every kubernetes.core module of the run: the same options, K8S_AUTH_*
    environment variables, in-cluster configuration and kubeconfig lookup."""
    if KUBERNETES_IMPORT_ERROR:
        raise StoreError('the kubernetes Python library and the kubernetes.core collection are required for the Lease '
                         'lock; install them where the module runs: pip install kubernetes, ansible-galaxy collection '
                         'install kubernetes.core')
    try:
        return get_api_client(**(auth or {})).client.client
    except (CoreException, ConfigException, OSError, ValueError) as exc:
        raise StoreError(f'cannot load the Kubernetes connection ({server_words(str(exc)) or type(exc).__name__}); '
                         'check vllm_dr_k8s_auth (kubeconfig, context, host, api_key)') from None


class LeaseLock:
    """A run lock as a coordination.k8s.io/v1 Lease in ``namespace``."""

    def __init__(self, api_client, namespace: str, name: str):
        self.api = kube_client.CoordinationV1Api(api_client)
        self.namespace, self.name = namespace, name
        self.where = f'the run lock Lease {name} in namespace {namespace}'

    def _call(self, verb: str, action):
        try:
            return action()
        except ApiException as exc:
            if exc.status == 403:
                raise StoreError(f'the API server denied {verb} on Lease {self.name} in namespace {self.namespace} '
                                 '(HTTP 403); grant get, create, update and delete on leases (coordination.k8s.io) '
                                 'in that namespace, as roles/restore/files/rbac.yml does') from None
            if exc.status == 401:
                raise StoreError('the API server rejected the credentials (HTTP 401); check vllm_dr_k8s_auth') from None
            raise
        except Urllib3Error as exc:
            raise StoreError(f'cannot reach the API server to {verb} Lease {self.name} in namespace {self.namespace} '
                             f'({type(exc).__name__}); check vllm_dr_k8s_auth and that the API server is up, '
                             'then re-run') from None

    def _body(self, owner: str, acquired_at: float, duration: int, now: float, version=None, transitions=0) -> dict:
        metadata = {'name': self.name, 'namespace': self.namespace,
                    'labels': {'app.kubernetes.io/managed-by': 'inferops.vllm_dr'}}
        if version is not None:
            metadata['resourceVersion'] = version
        return {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease', 'metadata': metadata,
                'spec': {'holderIdentity': owner, 'acquireTime': _micro_time(acquired_at),
                         'renewTime': _micro_time(now), 'leaseDurationSeconds': duration,
                         'leaseTransitions': transitions}}

    def read(self):
        try:
            lease = self._call('read', lambda: self.api.read_namespaced_lease(self.name, self.namespace))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise StoreError(self._failed('read', exc)) from None
        spec = lease.spec
        if spec is None or not spec.holder_identity:
            # a Lease without holder: free, but replaced only at the version read
            return Holder('', 0.0, 0.0, version=(lease.metadata.resource_version, 0))
        acquired = spec.acquire_time.timestamp() if spec.acquire_time else 0.0
        renewed = spec.renew_time.timestamp() if spec.renew_time else acquired
        return Holder(spec.holder_identity, acquired, renewed + (spec.lease_duration_seconds or 0),
                      version=(lease.metadata.resource_version, spec.lease_transitions or 0), renewed_at=renewed)

    def can_release(self) -> None:
        """A Lease is deleted by the same API as it is created; the permission precheck asked for both."""

    def _failed(self, verb: str, exc) -> str:
        return (f'the API server failed to {verb} Lease {self.name} in namespace {self.namespace} '
                f'(HTTP {exc.status} {server_words(exc.reason or "")}); check the namespace and re-run')

    def create(self, owner: str, duration: int, now: float) -> None:
        body = self._body(owner, now, duration, now)
        try:
            self._call('create', lambda: self.api.create_namespaced_lease(self.namespace, body))
        except ApiException as exc:
            if exc.status != 409:
                raise StoreError(self._failed('create', exc)) from None
            # created by someone else since it was read
            raise _lost_race(self, now) from None

    def replace(self, current: Holder, owner: str, duration: int, now: float, acquired_at: float) -> None:
        version, transitions = current.version
        body = self._body(owner, acquired_at, duration, now, version=version,
                          transitions=transitions + (current.owner != owner))
        try:
            self._call('update', lambda: self.api.replace_namespaced_lease(self.name, self.namespace, body))
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise StoreError(self._failed('update', exc)) from None
            raise _lost_race(self, now) from None

    def delete(self, current: Holder) -> None:
        version = current.version[0]
        options = kube_client.V1DeleteOptions(preconditions=kube_client.V1Preconditions(resource_version=version))
        try:
            self._call('delete', lambda: self.api.delete_namespaced_lease(self.name, self.namespace, body=options))
        except ApiException as exc:
            # 404 gone already, 409 changed meanwhile (expired and taken over): no longer this run's to delete
            if exc.status not in (404, 409):
                raise StoreError(self._failed('delete', exc)) from None


def open_lock(params: dict):
    """(the lock named by the module's options, the store to close afterwards or None)."""
    check_duration(params['duration'])
    if params.get('stale_after', 1) < 1:
        raise StoreError(f"stale_after {params['stale_after']} is out of range; give the seconds without renewal after "
                         'which a holder counts as dead, more than the longest step of a run (default 600)')
    if params['lock'] == 'lease':
        if not params['namespace']:
            raise StoreError('lock=lease needs namespace, the namespace of the workload the lock guards')
        return LeaseLock(kube_api_client(params['k8s_auth']), params['namespace'], params['name']), None
    from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.stores import open_store  # pylint: disable=import-outside-toplevel
    store = open_store(params)
    if store.backend == 'etcd':
        # a refusal names the lock's prefix and what the lock needs there, not the sessions' prefix
        return EtcdLock(lambda path, payload: store.call(path, payload, prefix=ETCD_KEY_PREFIX, need='readwrite'),
                        params['name']), store
    return RedisLock(store.lock_client(), params['name'], store.describe), store

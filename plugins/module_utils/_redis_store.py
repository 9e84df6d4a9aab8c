# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Session stores in Redis: standalone, Sentinel and Cluster.

Reads, conditional deletes and restores each run as one server-side script per
batch (per hash slot in a cluster), so every decision is atomic on the server
and a batch costs one round trip.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import time
import traceback

from ._session_backup import Entry
from ._session_errors import StoreError

REDIS_IMPORT_ERROR = None
try:
    import redis
    from redis.cluster import RedisCluster
    from redis.crc import key_slot
    from redis.sentinel import Sentinel
except ImportError:
    REDIS_IMPORT_ERROR = traceback.format_exc()

# One entry per key: {type, absolute expiry in ms or -1, HGETALL / GET}; the server
# clock anchors the TTLs so a restore can put back the same expiry moment.
READ_SCRIPT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local kind = redis.call('TYPE', key)['ok']
  local ttl = redis.call('PTTL', key)
  local at = -1
  if ttl >= 0 then at = now_ms + ttl end
  if kind == 'hash' then
    out[i] = {kind, at, redis.call('HGETALL', key)}
  elseif kind == 'string' then
    out[i] = {kind, at, redis.call('GET', key)}
  else
    out[i] = {kind, at}
  end
end
return out
"""

# ARGV: n, n guard field names, then per key: its type and n expectations
# ('=' .. value, or '!' for a field that was missing). A key is unlinked only when
# its type and every guard field are still what was judged.
DELETE_SCRIPT = """
local n = tonumber(ARGV[1])
local result = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local at = 1 + n + (i - 1) * (n + 1)
  local kind = ARGV[at + 1]
  local same = redis.call('TYPE', key)['ok'] == kind
  if same and kind == 'hash' then
    for j = 1, n do
      local want = ARGV[at + 1 + j]
      local have = redis.call('HGET', key, ARGV[1 + j])
      if want == '!' then
        same = same and (have == false)
      else
        same = same and (have == string.sub(want, 2))
      end
    end
  elseif same and kind == 'string' then
    same = redis.call('GET', key) == string.sub(ARGV[at + 2], 2)
  end
  if same then
    redis.call('UNLINK', key)
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
"""

# KEYS: the keys; ARGV per key: type, absolute expiry ms (-1: none), field count
# (or 1 for a string), then fields and values (or the value). A key that exists
# again is never overwritten (1 restored, 0 exists, -1 its TTL already ran out).
RESTORE_SCRIPT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local result = {}
local at = 1
for i = 1, #KEYS do
  local key = KEYS[i]
  local kind = ARGV[at]
  local expire_at = tonumber(ARGV[at + 1])
  local count = tonumber(ARGV[at + 2])
  local first = at + 3
  at = first + count
  if redis.call('EXISTS', key) == 1 then
    result[i] = 0
  elseif expire_at >= 0 and expire_at <= now_ms then
    result[i] = -1
  else
    if kind == 'hash' then
      for j = first, first + count - 1, 2 do
        redis.call('HSET', key, ARGV[j], ARGV[j + 1])
      end
    else
      redis.call('SET', key, ARGV[first])
    end
    if expire_at >= 0 then
      redis.call('PEXPIREAT', key, expire_at)
    end
    result[i] = 1
  end
end
return result
"""


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def check_pattern(pattern: str) -> str:
    """The literal prefix of a SCAN pattern; refuse patterns that would match every key."""
    prefix = ''
    for char in pattern:
        if char in '*?[\\':
            break
        prefix += char
    if not prefix:
        raise StoreError(f'key_pattern {pattern!r} has no literal prefix and would match every key in the database; '
                         'give the session key prefix, e.g. vllm:session:*')
    if pattern.count('[') != pattern.count(']'):
        raise StoreError(f'key_pattern {pattern!r} has an unbalanced [ ]; fix the glob, e.g. vllm:session:*')
    return prefix


def _describe_error(exc: Exception, location: str) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, redis.AuthenticationError) or 'WRONGPASS' in text or 'NOAUTH' in text \
            or 'invalid username-password' in text or 'Authentication required' in text:
        return f'Redis at {location} rejected the credentials ({text}); check login_user and login_password'
    if isinstance(exc, redis.exceptions.NoPermissionError) or text.startswith('NOPERM') or 'no permissions' in text:
        return (f'Redis at {location} denied a command to this user ({text}); grant the ACL user '
                '+scan +evalsha +eval +script|load +type +pttl +hgetall +get +hget +unlink +exists +hset +set '
                '+pexpireat +time on the session keys')
    if 'SSL' in text or 'certificate' in text.lower() or 'TLS' in text:
        return f'TLS with Redis at {location} failed ({text}); check tls, ca_certs, validate_certs and the client certificate'
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        return f'cannot reach Redis at {location} ({text}); check login_host/login_port and that the server is up'
    return f'Redis at {location} failed: {text}'


class _Scripts:
    """The three scripts, loaded once per server (EVALSHA with a fallback to loading)."""

    def __init__(self, client):
        self.read = client.register_script(READ_SCRIPT)
        self.delete = client.register_script(DELETE_SCRIPT)
        self.restore = client.register_script(RESTORE_SCRIPT)


class RedisPartition:
    """One server that owns part (or all) of the keyspace: a standalone server or one cluster primary."""

    def __init__(self, client, location: str, pattern: str, cluster: bool):
        self.client = client
        self.location = location
        self.pattern = pattern
        self.cluster = cluster
        self.scripts = _Scripts(client)

    def _groups(self, keys):
        """Script calls may only touch one hash slot in a cluster: one group per slot there, one group elsewhere."""
        if not self.cluster:
            return [keys]
        groups = {}
        for key in keys:
            groups.setdefault(key_slot(key), []).append(key)
        return list(groups.values())

    def _run_grouped(self, script, items, args_for):
        """Run ``script`` once per slot group of ``items`` in one pipeline; results in ``items`` order."""
        keyed = {}
        for item in items:
            keyed.setdefault(item.key, item)
        groups = self._groups(list(keyed))
        pipe = self.client.pipeline(transaction=False)
        for group in groups:
            script(keys=group, args=args_for([keyed[key] for key in group]), client=pipe)
        replies = pipe.execute()
        by_key = {}
        for group, reply in zip(groups, replies):
            by_key.update(zip(group, reply))
        return [by_key[item.key] for item in items]

    def _guarded(self, action):
        try:
            return action()
        except redis.RedisError as exc:
            raise StoreError(_describe_error(exc, self.location)) from None

    def ping(self) -> None:
        self._guarded(self.client.ping)

    def scan_batches(self, batch_size: int):
        """Every key matching the pattern, read in batches of entries (keys gone since SCAN are skipped)."""
        cursor = 0
        while True:
            cursor, keys = self._guarded(lambda c=cursor: self.client.scan(c, match=self.pattern, count=batch_size))
            if keys:
                yield self._read(keys)
            if cursor == 0:
                return

    def _read(self, keys):
        probes = [Entry(key, None) for key in keys]
        replies = self._guarded(lambda: self._run_grouped(self.scripts.read, probes, lambda group: []))
        entries = []
        for key, reply in zip(keys, replies):
            kind = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
            if kind == 'none':
                continue
            expire_at = reply[1] if reply[1] >= 0 else None
            if kind == 'hash':
                flat = reply[2]
                entries.append(Entry(key, kind, fields=dict(zip(flat[0::2], flat[1::2])), pexpireat=expire_at))
            elif kind == 'string':
                entries.append(Entry(key, kind, value=reply[2], pexpireat=expire_at))
            else:
                entries.append(Entry(key, kind, pexpireat=expire_at))
        return entries

    def delete_unchanged(self, entries, guard_fields):
        def args_for(group):
            args = [len(guard_fields)] + list(guard_fields)
            for entry in group:
                args.append(entry.kind)
                if entry.kind == 'hash':
                    for name in guard_fields:
                        value = entry.fields.get(name)
                        args.append(b'!' if value is None else b'=' + value)
                else:
                    args.append(b'=' + (entry.value or b''))
                    args.extend([b'!'] * (len(guard_fields) - 1))
            return args

        replies = self._guarded(lambda: self._run_grouped(self.scripts.delete, entries, args_for))
        return [reply == 1 for reply in replies]

    def would_restore(self, entries):
        """What restore() would answer, without writing: 1 absent, 0 exists (TTLs are judged by restore)."""
        def probe():
            pipe = self.client.pipeline(transaction=False)
            for entry in entries:
                pipe.exists(entry.key)
            return pipe.execute()

        return [0 if exists else 1 for exists in self._guarded(probe)]

    def restore(self, entries):
        def args_for(group):
            args = []
            for entry in group:
                if entry.kind == 'hash':
                    flat = [part for pair in entry.fields.items() for part in pair]
                else:
                    flat = [entry.value]
                args.extend([entry.kind, -1 if entry.pexpireat is None else entry.pexpireat, len(flat)] + flat)
            return args

        return self._guarded(lambda: self._run_grouped(self.scripts.restore, entries, args_for))


def _tls_kwargs(params: dict) -> dict:
    if not params.get('tls'):
        return {}
    return {
        'ssl': True,
        'ssl_cert_reqs': 'required' if params['validate_certs'] else 'none',
        'ssl_check_hostname': bool(params['validate_certs']),
        'ssl_ca_certs': params.get('ca_certs'),
        'ssl_certfile': params.get('client_cert_file'),
        'ssl_keyfile': params.get('client_key_file'),
    }


def _client_kwargs(params: dict) -> dict:
    kwargs = {
        'username': params.get('login_user'),
        'password': params.get('login_password'),
        'socket_timeout': params['timeout'],
        'socket_connect_timeout': params['timeout'],
    }
    kwargs.update(_tls_kwargs(params))
    return kwargs


class RedisStore:
    """The partitions of a Redis deployment, connected and checked."""

    def __init__(self, params: dict, pattern: str):
        if REDIS_IMPORT_ERROR:
            raise StoreError('the redis Python library is required for Redis backends; '
                             'install it on the host that runs the module: pip install redis')
        self.backend = params['backend']
        self.pattern = pattern
        self.prefix = check_pattern(pattern)
        self._cluster_client = None
        self._partitions = self._connect(params)

    def _connect(self, params: dict):
        backend = params['backend']
        kwargs = _client_kwargs(params)
        if backend == 'redis_cluster':
            return self._connect_cluster(params, kwargs)
        if backend == 'redis_sentinel':
            client, location = self._connect_sentinel(params, kwargs)
        else:
            location = f'{params["login_host"]}:{params["login_port"]}'
            client = redis.Redis(host=params['login_host'], port=params['login_port'], db=params['db'], **kwargs)
        partition = RedisPartition(client, location, self.pattern, cluster=False)
        partition.ping()
        return [partition]

    def _connect_sentinel(self, params: dict, kwargs: dict):
        hosts = []
        for item in params['sentinel_hosts'] or []:
            host, _sep, port = item.rpartition(':')
            if not host or not port.isdigit():
                raise StoreError(f'sentinel_hosts entry {item!r} is not host:port; give e.g. 10.0.0.5:26379')
            hosts.append((host, int(port)))
        if not hosts:
            raise StoreError('backend redis_sentinel needs sentinel_hosts; give the Sentinels as host:port')
        sentinel_kwargs = dict(_tls_kwargs(params), socket_timeout=params['timeout'],
                               socket_connect_timeout=params['timeout'])
        if params.get('sentinel_password'):
            sentinel_kwargs['password'] = params['sentinel_password']
        sentinel = Sentinel(hosts, sentinel_kwargs=sentinel_kwargs, **kwargs)
        name = params['sentinel_service_name']
        where = f'Sentinel {",".join(params["sentinel_hosts"])} service {name}'
        try:
            master = self._settled_master(sentinel, name, kwargs, params['timeout'])
        except redis.sentinel.MasterNotFoundError as exc:
            raise StoreError(f'{where}: no Sentinel knows a master ({exc}); check sentinel_hosts and sentinel_service_name') from None
        except redis.RedisError as exc:
            raise StoreError(_describe_error(exc, where)) from None
        if master is None:
            raise StoreError(f'{where}: a failover is still in progress after {params["timeout"]:g}s; '
                             'retry when the Sentinels agree on the primary, or raise timeout')
        return sentinel.master_for(name, db=params['db'], **kwargs), f'{master[0]}:{master[1]} ({where})'

    @staticmethod
    def _settled_master(sentinel, name: str, kwargs: dict, timeout: float):
        """The primary once a failover has settled: the Sentinels' views agree and it serves as primary.

        Right after a failover a Sentinel can still list the old primary, which has not
        been demoted yet; sweeping it would delete from a server about to be replaced.
        """
        deadline = time.monotonic() + timeout
        while True:
            master = sentinel.discover_master(name)
            announced = sentinel.sentinels[0].sentinel_get_master_addr_by_name(name)
            if announced and (_text(announced[0]), int(announced[1])) == (master[0], int(master[1])):
                role = redis.Redis(host=master[0], port=master[1], **kwargs).role()[0]
                if _text(role) == 'master':
                    return master
            if time.monotonic() > deadline:
                return None
            time.sleep(0.2)

    def _connect_cluster(self, params: dict, kwargs: dict):
        location = f'{params["login_host"]}:{params["login_port"]}'
        if params['db']:
            raise StoreError('Redis Cluster has only database 0; remove db or set it to 0')
        try:
            self._cluster_client = RedisCluster(host=params['login_host'], port=params['login_port'], **kwargs)
            primaries = self._cluster_client.get_primaries()
        except redis.RedisError as exc:
            raise StoreError(_describe_error(exc, f'cluster {location}')) from None
        partitions = []
        for node in primaries:
            client = self._cluster_client.get_redis_connection(node)
            partition = RedisPartition(client, f'{node.host}:{node.port}', self.pattern, cluster=True)
            partition.ping()
            partitions.append(partition)
        return partitions

    @property
    def location(self) -> str:
        return ', '.join(partition.location for partition in self._partitions)

    def partitions(self):
        return list(self._partitions)

    def restore_partition_for(self, entries):
        """Group entries by the partition that owns their key."""
        if self._cluster_client is None:
            return [(self._partitions[0], list(entries))]
        owners = {(p.location): p for p in self._partitions}
        grouped = {}
        for entry in entries:
            node = self._cluster_client.get_node_from_key(entry.key)
            grouped.setdefault(f'{node.host}:{node.port}', []).append(entry)
        return [(owners[location], group) for location, group in grouped.items()]

    def session_id(self, key: bytes) -> str:
        text = key.decode('utf-8', 'replace')
        return text[len(self.prefix):] if text.startswith(self.prefix) else text

    def close(self) -> None:
        for partition in self._partitions:
            partition.client.close()
        if self._cluster_client is not None:
            self._cluster_client.close()

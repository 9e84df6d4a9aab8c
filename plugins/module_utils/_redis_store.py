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

from ._session_backup import Batch, Entry
from ._timestamps import EPOCH_MILLIS_THRESHOLD
from ._session_errors import StoreError

REDIS_IMPORT_ERROR = None
try:
    import redis
    from redis.cluster import RedisCluster
    from redis.crc import key_slot
    from redis.sentinel import Sentinel
except ImportError:
    REDIS_IMPORT_ERROR = traceback.format_exc()

# Reads and judges a batch on the server, so that a sweep over millions of sessions
# moves only the sessions it removes. ARGV: expiry field, cutoff (epoch seconds),
# select ('expired', 'all', or 'read' to judge nothing), malformed ('keep' or
# 'sweep'), the epoch-milliseconds threshold.
# The parser decides only the forms it knows exactly (epoch seconds or ms as
# digits; YYYY-MM-DD[T ]HH:MM:SS[.frac][Z|+HH:MM|-HH:MM] with valid fields); any
# other value comes back "undecided" and the module judges it in Python, so both
# give one verdict for every value.
# Reply: {decided, malformed, wrong_type, earliest, latest, entries...}; each entry
# is {key, type, verdict ('match' or 'undecided'), pttl, HGETALL or GET}.
JUDGE_SCRIPT = """
local field, cutoff, select, malformed = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local millis = tonumber(ARGV[5])
local month_days = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((m + 9) % 12) + 2) / 5) + d - 1
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end

local function epoch(text)
  if string.find(text, '^%d+$') or string.find(text, '^%d+%.%d+$') then
    local n = tonumber(text)
    if n > millis then n = n / 1000 end
    return n
  end
  local y, mo, d, h, mi, s, rest = string.match(text, '^(%d%d%d%d)%-(%d%d)%-(%d%d)[T ](%d%d):(%d%d):(%d%d)(.*)$')
  if not y then return nil end
  y, mo, d, h, mi, s = tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi), tonumber(s)
  local leap = (y % 4 == 0 and y % 100 ~= 0) or y % 400 == 0
  if y < 1 or mo < 1 or mo > 12 or d < 1 or h > 23 or mi > 59 or s > 59 then return nil end
  if d > month_days[mo] + ((mo == 2 and leap) and 1 or 0) then return nil end
  local micro = 0
  local frac, zone = string.match(rest, '^%.(%d+)(.*)$')
  if frac then
    micro = tonumber(string.sub(frac .. '00000', 1, 6))
    rest = zone
  end
  local offset = 0
  if rest == 'Z' or rest == 'z' then
    offset = 0
  elseif rest ~= '' then
    local sign, oh, om = string.match(rest, '^([+-])(%d%d):(%d%d)$')
    if not sign or tonumber(oh) > 23 or tonumber(om) > 59 then return nil end
    offset = (tonumber(oh) * 3600 + tonumber(om) * 60) * (sign == '-' and -1 or 1)
  end
  local seconds = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset
  return (seconds * 1000000 + micro) / 1000000
end

local decided, bad, wrong, earliest, latest = 0, 0, 0, nil, nil
local out = {0, 0, 0, '', ''}
local function keep_entry(key, kind, verdict, content)
  out[#out + 1] = key
  out[#out + 1] = kind
  out[#out + 1] = verdict
  out[#out + 1] = redis.call('PTTL', key)
  out[#out + 1] = content
end

for i = 1, #KEYS do
  local key = KEYS[i]
  local raw = redis.pcall('HGET', key, field)
  if type(raw) == 'table' and raw.err and not string.find(raw.err, 'WRONGTYPE', 1, true) then
    error(raw.err)
  end
  if type(raw) == 'table' then
    local kind = redis.call('TYPE', key)['ok']
    decided = decided + 1
    wrong = wrong + 1
    if kind == 'string' and malformed == 'sweep' and select ~= 'read' then
      keep_entry(key, kind, 'match', redis.call('GET', key))
    end
  elseif select == 'read' then
    if raw ~= false or redis.call('EXISTS', key) == 1 then
      keep_entry(key, 'hash', 'undecided', redis.call('HGETALL', key))
    end
  elseif raw == false then
    if redis.call('EXISTS', key) == 1 then
      decided = decided + 1
      bad = bad + 1
      if malformed == 'sweep' then keep_entry(key, 'hash', 'match', redis.call('HGETALL', key)) end
    end
  else
    local when = epoch(raw)
    if when == nil then
      keep_entry(key, 'hash', 'undecided', redis.call('HGETALL', key))
    else
      decided = decided + 1
      if earliest == nil or when < earliest then earliest = when end
      if latest == nil or when > latest then latest = when end
      if select == 'all' or when < cutoff then
        keep_entry(key, 'hash', 'match', redis.call('HGETALL', key))
      end
    end
  end
end
out[1], out[2], out[3] = decided, bad, wrong
if earliest then out[4] = string.format('%.6f', earliest) end
if latest then out[5] = string.format('%.6f', latest) end
return out
"""

# ARGV: n, n guard field names, then per key: its type and n expectations
# ('=' .. value, or '!' for a field that was missing; a string key has its value
# first). A key is unlinked only when its type and every guard field are still
# what was judged; pcall turns a changed type into "changed", not an error.
DELETE_SCRIPT = """
local function wrongtype_as_false(reply)
  if type(reply) == 'table' and reply.err then
    if string.find(reply.err, 'WRONGTYPE', 1, true) then return false end
    error(reply.err)
  end
  return reply
end
local n = tonumber(ARGV[1])
local fields = {}
for j = 1, n do fields[j] = ARGV[1 + j] end
local result = {}
local at = 2 + n
for i = 1, #KEYS do
  local key = KEYS[i]
  local kind = ARGV[at]
  local same
  if kind == 'hash' then
    local have = wrongtype_as_false(redis.pcall('HMGET', key, unpack(fields)))
    same = have ~= false
    local present = false
    for j = 1, n do
      local want = ARGV[at + j]
      if want == '!' then
        same = same and have[j] == false
      else
        same = same and have[j] == string.sub(want, 2)
        present = true
      end
    end
    if same and not present then
      same = redis.call('TYPE', key)['ok'] == 'hash'
    end
  else
    same = wrongtype_as_false(redis.pcall('GET', key)) == string.sub(ARGV[at + 1], 2)
  end
  at = at + 1 + n
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


def _as_fields(content) -> dict:
    """HGETALL as a dict, whether the connection speaks RESP2 (flat list) or RESP3 (map)."""
    if isinstance(content, dict):
        return content
    return dict(zip(content[0::2], content[1::2]))


def _expire_at(ttl) -> int | None:
    """Absolute expiry in ms from a PTTL taken now (None: no TTL)."""
    ttl = int(ttl)
    return int(time.time() * 1000) + ttl if ttl >= 0 else None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# KEYS[1] the session; ARGV: the refresh token that was used, the new one, then the
# fields to write. Compare-and-set: a session refreshed by someone else meanwhile is
# left alone (1 written, 2 already holds the new token, 0 changed by someone else).
SWAP_SCRIPT = """
local current = redis.call('HGET', KEYS[1], 'refresh_token')
if current == ARGV[2] then return 2 end
if current ~= ARGV[1] then return 0 end
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""


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


def _error_text(exc: Exception) -> str:
    """The server's words, without the pipeline's echo of the command (which lists every key)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if 'caused error: ' in text:
        text = text.split('caused error: ', 1)[1]
    return text[:300]


def _describe_error(exc: Exception, location: str) -> str:
    text = _error_text(exc)
    if isinstance(exc, redis.AuthenticationError) or 'WRONGPASS' in text or 'NOAUTH' in text \
            or 'invalid username-password' in text or 'Authentication required' in text:
        return f'Redis at {location} rejected the credentials ({text}); check login_user and login_password'
    if isinstance(exc, redis.exceptions.NoPermissionError) or 'noperm' in text.lower() or 'no permissions' in text \
            or "can't run this command" in text:
        return (f'Redis at {location} denied a command to this user ({text}); grant the ACL user '
                '+scan +evalsha +eval +script|load +type +pttl +hgetall +get +hget +hmget +unlink +exists +hset '
                '+set +pexpireat +time on the session keys')
    if 'SSL' in text or 'certificate' in text.lower() or 'TLS' in text:
        return f'TLS with Redis at {location} failed ({text}); check tls, ca_certs, validate_certs and the client certificate'
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        return f'cannot reach Redis at {location} ({text}); check login_host/login_port and that the server is up'
    return f'Redis at {location} failed: {text}'


class _Scripts:
    """The scripts, loaded once per server (EVALSHA with a fallback to loading)."""

    def __init__(self, client):
        self.judge = client.register_script(JUDGE_SCRIPT)
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

    def _run_grouped_replies(self, script, items, args_for):
        """Run ``script`` once per slot group of ``items`` in one pipeline; one reply per group."""
        keyed = {}
        for item in items:
            keyed.setdefault(item.key, item)
        groups = self._groups(list(keyed))
        pipe = self.client.pipeline(transaction=False)
        for group in groups:
            script(keys=group, args=args_for([keyed[key] for key in group]), client=pipe)
        return groups, pipe.execute()

    def _run_grouped(self, script, items, args_for):
        """Like _run_grouped_replies for scripts that answer per key; answers in ``items`` order."""
        groups, replies = self._run_grouped_replies(script, items, args_for)
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

    def scan_batches(self, batch_size: int, options):
        """Every key matching the pattern, SCANned and judged on the server one batch at a time."""
        judge_select = options.select if options.select in ('expired', 'all') else 'read'
        args = [options.expires_field, repr(float(options.cutoff)), judge_select, options.malformed,
                EPOCH_MILLIS_THRESHOLD]
        cursor = 0
        while True:
            cursor, keys = self._guarded(lambda c=cursor: self.client.scan(c, match=self.pattern, count=batch_size))
            if keys:
                yield self._judge(keys, args)
            if cursor == 0:
                return

    def _judge(self, keys, args) -> Batch:
        probes = [Entry(key, None) for key in keys]
        _groups, replies = self._guarded(
            lambda: self._run_grouped_replies(self.scripts.judge, probes, lambda group: args))
        batch = Batch()
        for reply in replies:
            batch.add_counts(int(reply[0]), int(reply[1]), int(reply[2]),
                             float(reply[3]) if reply[3] else None, float(reply[4]) if reply[4] else None)
            flat = reply[5:]
            for at in range(0, len(flat), 5):
                key, kind, verdict, ttl, content = flat[at:at + 5]
                kind = _text(kind)
                expire_at = _expire_at(ttl)
                if kind == 'hash':
                    entry = Entry(key, kind, fields=_as_fields(content), pexpireat=expire_at)
                else:
                    entry = Entry(key, kind, value=content, pexpireat=expire_at)
                (batch.victims if _text(verdict) == 'match' else batch.entries).append(entry)
        return batch

    def delete_unchanged(self, entries, guard_fields):
        def args_for(group):
            args = [len(guard_fields)] + list(guard_fields)
            for entry in group:
                args.append(entry.kind)
                if entry.kind == 'hash':
                    fields = entry.fields
                    args.extend(b'!' if fields.get(name) is None else b'=' + fields[name] for name in guard_fields)
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

    def _key_client(self):
        return self._cluster_client if self._cluster_client is not None else self._partitions[0].client

    def get_session(self, session_id: str):
        """The fields of one session hash, or None."""
        key = (self.prefix + session_id).encode('utf-8')
        try:
            fields = self._key_client().hgetall(key)
        except redis.ResponseError as exc:
            raise StoreError(f'session {session_id} is not a hash ({_error_text(exc)}); check session_id and key_pattern') from None
        except redis.RedisError as exc:
            raise StoreError(_describe_error(exc, self.location)) from None
        return fields or None

    def swap_tokens(self, session_id: str, expected_refresh: bytes, fields: dict) -> str:
        """Store rotated tokens only if the session still holds ``expected_refresh``.

        Returns 'written', 'already' (the service stored the same tokens) or 'conflict'.
        """
        key = (self.prefix + session_id).encode('utf-8')
        flat = [part for pair in fields.items() for part in pair]
        try:
            outcome = self._key_client().eval(SWAP_SCRIPT, 1, key, expected_refresh, fields[b'refresh_token'], *flat)
        except redis.RedisError as exc:
            raise StoreError(_describe_error(exc, self.location)) from None
        return {1: 'written', 2: 'already'}.get(int(outcome), 'conflict')

    def close(self) -> None:
        for partition in self._partitions:
            partition.client.close()
        if self._cluster_client is not None:
            self._cluster_client.close()

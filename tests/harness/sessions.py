"""vLLM sessions in a store, shaped as the incident describes them."""

from __future__ import annotations

import base64
import json
import time
import urllib.request

PREFIX = 'vllm:session:'
ETCD_PREFIX = 'vllm/session/'


def iso(epoch: float) -> str:
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(epoch))


def session(sid: str, expires_at, generation: int = 0) -> dict:
    return {'access_token': f'at-{sid}-{generation}-SECRET', 'refresh_token': f'rt-{sid}-{generation}-SECRET',
            'expires_at': expires_at}


def seed_redis(client, expired=0, valid=0, malformed=0, wrong_type=0, prefix=PREFIX, now=None):
    """Sessions with ids e0.., v0.., m0.. (missing or unreadable expiry) and string keys w0..; returns the ids."""
    now = time.time() if now is None else now
    ids = {'expired': [f'e{i}' for i in range(expired)], 'valid': [f'v{i}' for i in range(valid)],
           'malformed': [f'm{i}' for i in range(malformed)], 'wrong_type': [f'w{i}' for i in range(wrong_type)]}
    pipe = client.pipeline(transaction=False)
    for i, sid in enumerate(ids['expired']):
        # every expiry format the stores hold: ISO with Z, with an offset, epoch seconds, epoch ms
        expiry = [iso(now - 3600 - i), '2024-07-10T14:00:00+02:00', str(int(now - 60)), str(int((now - 120) * 1000))][i % 4]
        pipe.hset(prefix + sid, mapping=session(sid, expiry))
    for i, sid in enumerate(ids['valid']):
        pipe.hset(prefix + sid, mapping=session(sid, iso(now + 86400 + i)))
    for i, sid in enumerate(ids['malformed']):
        fields = session(sid, 'soon')
        if i % 2:
            del fields['expires_at']
        pipe.hset(prefix + sid, mapping=fields)
    for sid in ids['wrong_type']:
        pipe.set(prefix + sid, 'a string where a session hash belongs')
    pipe.execute()
    return ids


def dump_redis(client, pattern=PREFIX + '*'):
    """Every key under the pattern with its type, content and whether it has a TTL."""
    state = {}
    for key in client.scan_iter(match=pattern, count=1000):
        kind = client.type(key).decode()
        content = client.hgetall(key) if kind == 'hash' else client.get(key) if kind == 'string' else \
            sorted(client.smembers(key)) if kind == 'set' else None
        state[key] = (kind, content, client.pttl(key) > 0)
    return state


def dump_hashes(client, pattern=PREFIX + '*') -> dict:
    """Every session key with its fields, read with pipelined commands (fast enough for 200k sessions)."""
    keys = list(client.scan_iter(match=pattern, count=5000))
    state = {}
    for start in range(0, len(keys), 5000):
        chunk = keys[start:start + 5000]
        pipe = client.pipeline(transaction=False)
        for key in chunk:
            pipe.hgetall(key)
        state.update(zip(chunk, pipe.execute()))
    return state


def seed_etcd(url, expired=0, valid=0, malformed=0, wrong_type=0, prefix=ETCD_PREFIX, now=None):
    """The same population in etcd, as JSON values (through the v3 JSON gateway)."""
    now = time.time() if now is None else now
    ids = {'expired': [f'e{i}' for i in range(expired)], 'valid': [f'v{i}' for i in range(valid)],
           'malformed': [f'm{i}' for i in range(malformed)], 'wrong_type': [f'w{i}' for i in range(wrong_type)]}
    values = {}
    for i, sid in enumerate(ids['expired']):
        values[sid] = json.dumps(session(sid, iso(now - 3600 - i) if i % 2 else int(now - 60)))
    for i, sid in enumerate(ids['valid']):
        values[sid] = json.dumps(session(sid, iso(now + 86400 + i)))
    for sid in ids['malformed']:
        values[sid] = json.dumps(session(sid, 'soon'))
    for sid in ids['wrong_type']:
        values[sid] = 'not json'
    for sid, value in values.items():
        body = json.dumps({'key': base64.b64encode((prefix + sid).encode()).decode(),
                           'value': base64.b64encode(value.encode()).decode()}).encode()
        with urllib.request.urlopen(urllib.request.Request(f'{url}/v3/kv/put', data=body), timeout=5):
            pass
    return ids


def dump_etcd(url, prefix=ETCD_PREFIX):
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    body = json.dumps({'key': base64.b64encode(prefix.encode()).decode(),
                       'range_end': base64.b64encode(end.encode()).decode()}).encode()
    with urllib.request.urlopen(urllib.request.Request(f'{url}/v3/kv/range', data=body), timeout=5) as response:
        reply = json.load(response)
    return {base64.b64decode(kv['key']).decode(): base64.b64decode(kv.get('value', '')).decode()
            for kv in reply.get('kvs', [])}

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether the store's user may do what a sweep (and the restore of its backup) will do, asked without changing anything.

A run purges the token cache and edits the service's configuration before it sweeps the
store: a user that may read the sessions but not delete them must be refused before the
first of those changes, not by the sweep after them. Redis is asked with ACL DRYRUN
(Redis 7.0 and later, Valkey) for each command the sweep and the restore send, with a
session key; etcd with a transaction whose comparison never holds and whose other branch
deletes the prefix (etcd checks both branches' permissions and runs neither). Where the
server cannot be asked (no ACL DRYRUN, or the user may not run it), the answer says the
permissions were not checked rather than guessing.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import re

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import classify_redis_error, redis_error_text

try:
    import redis
except ImportError:
    pass  # only a Redis store, opened with the library, is asked

# A key no session uses: ACL DRYRUN judges the key's name against the user's key patterns, it never reads it.
_PROBE_ID = 'vllm-dr-permission-probe'
_GLOB = re.compile(r'\\.|\[[^]]*\]|[*?]')

# What a sweep sends, and what the restore of its backup sends (the rollback): each (ACL name, command).
# KEY stands for a session key, PATTERN for the key pattern. Inside the delete and restore scripts the
# server checks each command the script calls against the same ACL, with its key.
REDIS_NEEDS = (
    ('scan', ('SCAN', '0', 'MATCH', 'PATTERN', 'COUNT', '1000')),
    ('hgetall', ('HGETALL', 'KEY')),
    ('get', ('GET', 'KEY')),
    ('pttl', ('PTTL', 'KEY')),
    ('script|load', ('SCRIPT', 'LOAD', 'return 1')),
    ('evalsha', ('EVALSHA', '0' * 40, '1', 'KEY')),
    ('hmget', ('HMGET', 'KEY', 'expires_at')),
    ('type', ('TYPE', 'KEY')),
    ('unlink', ('UNLINK', 'KEY')),
    ('exists', ('EXISTS', 'KEY')),
    ('time', ('TIME',)),
    ('hset', ('HSET', 'KEY', 'field', 'value')),
    ('set', ('SET', 'KEY', 'value')),
    ('pexpireat', ('PEXPIREAT', 'KEY', '1')),
)


def probe_key(pattern: str) -> str:
    """A key name the pattern matches: each glob part replaced by a plain word."""
    return _GLOB.sub(lambda match: match.group(0)[1:] if match.group(0).startswith('\\') else
                     (_PROBE_ID if match.group(0) == '*' else 'p'), pattern)


def _text(reply) -> str:
    return reply.decode('utf-8', 'replace') if isinstance(reply, bytes) else str(reply)


def judge_redis(user: str, pattern: str, answers) -> dict:
    """The verdict on ACL DRYRUN's answers: ``answers`` is (ACL name, answer) pairs, an answer ``OK``, the server's
    sentence for a denial, or an exception for a command the server does not know (renamed away)."""
    missing, renamed, keys_denied = [], [], False
    for name, answer in answers:
        if isinstance(answer, Exception):
            if name not in renamed:
                renamed.append(name)
            continue
        text = _text(answer)
        if text == 'OK':
            continue
        if "permissions to access the '" in text and text.endswith("' key"):
            keys_denied = True
        elif name not in missing:
            missing.append(name)
    verdict = {'checked': True, 'user': user, 'missing': missing + (['keys ' + pattern] if keys_denied else []),
               'renamed': renamed, 'grant': None, 'reason': None}
    grants = [f'+{name}' for name in missing] + ([f'~{pattern}'] if keys_denied else [])
    if grants:
        verdict['grant'] = f'ACL SETUSER {user} {" ".join(grants)}'
    return verdict


def unchecked(reason: str) -> dict:
    return {'checked': False, 'user': None, 'missing': [], 'renamed': [], 'grant': None, 'reason': reason}


def _dryrun_refused(exc) -> str | None:
    """Why ACL DRYRUN itself cannot be asked (too old a server, or a user that may not run it), or None."""
    text = redis_error_text(exc)
    if classify_redis_error(exc) == 'noperm':
        return f'the user may not run ACL DRYRUN ({text}); grant it +acl|dryrun to have them checked'
    if 'unknown subcommand' in text.lower() or 'unknown command' in text.lower():
        return f'the server has no ACL DRYRUN ({text}; Redis 7.0 or later, or Valkey, has it)'
    return None


def probe_redis(clients, user: str, pattern: str) -> dict:
    """Ask each server (each primary of a cluster) with ACL DRYRUN whether ``user`` may run what the sweep sends."""
    key = probe_key(pattern)
    answers = []
    for client in clients:
        for name, command in REDIS_NEEDS:
            args = [key if part == 'KEY' else pattern if part == 'PATTERN' else part for part in command]
            try:
                answers.append((name, client.execute_command('ACL', 'DRYRUN', user, *args)))
            except redis.ResponseError as exc:
                reason = _dryrun_refused(exc)
                if reason is not None:
                    return unchecked(reason)
                answers.append((name, exc))  # the server knows no such command: renamed away
            except redis.RedisError as exc:
                return unchecked(f'ACL DRYRUN failed ({redis_error_text(exc)})')
    return judge_redis(user, pattern, answers)


def judge_etcd(user, prefix: str, allowed: bool) -> dict:
    """The verdict on etcd's answer to a delete under the prefix: a delete (and the restore's put) needs readwrite."""
    verdict = {'checked': True, 'user': user, 'missing': [], 'renamed': [], 'grant': None, 'reason': None}
    if not allowed:
        verdict['missing'] = [f'readwrite on {prefix}']
        verdict['grant'] = f'etcdctl role grant-permission <role of {user}> readwrite {prefix} --prefix'
    return verdict


def refusal(permissions, location: str) -> str | None:
    """One line refusing a run whose store user lacks what the sweep needs, or None (all there, or not checked)."""
    if not permissions or not permissions.get('checked'):
        return None
    problems = []
    commands = [name for name in permissions['missing'] if not name.startswith(('keys ', 'readwrite '))]
    keys = [name.split(' ', 1)[1] for name in permissions['missing'] if name.startswith('keys ')]
    prefixes = [name for name in permissions['missing'] if name.startswith('readwrite ')]
    if commands:
        problems.append(f'may not run {", ".join(commands)}')
    if keys:
        problems.append(f'may not delete or write the keys {", ".join(keys)}')
    if prefixes:
        problems.append(f'has no {", ".join(prefixes)}')
    if permissions['grant']:
        problems.append(f'grant it: {permissions["grant"]}')
    if permissions['renamed']:
        problems.append(f'the server knows no {", ".join(c.upper() for c in permissions["renamed"])} (renamed away '
                        f'with rename-command): remove that rename-command line and restart the server')
    if not problems:
        return None
    return (f'the session store user {permissions["user"]!r} at {location} cannot do what the sweep of the stale '
            f'sessions and its restore need: {"; ".join(problems)}; then re-run (nothing was changed)')

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The primary the Sentinels name, checked on every connection and after every write (backend redis_sentinel).

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import itertools
import time

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_script import reply_or_raise
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError, describe_redis_error, redis_error_text
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import redis_connection
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_connection import as_text, host_port

try:
    import redis
except ImportError:
    pass  # REDIS_IMPORT_ERROR says so when a store is opened


class SentinelGuard:
    """The primary the Sentinels name, checked on every connection and after every delete (backend redis_sentinel).

    A failover promotes a replica while the old primary still takes writes, until the
    Sentinels demote it seconds later; whatever it took meanwhile is lost when it resyncs.
    So every connection must reach the primary the Sentinels named and serve as primary,
    and every delete is followed by WAIT for every replica the primary had (whichever one
    is promoted then holds it) and ROLE. A delete not confirmed so stops the sweep, and only
    what the primary the Sentinels name then no longer holds is counted as deleted (stop,
    after_failure: the loss accounting).
    """

    def __init__(self, sentinel, name: str, kwargs: dict, timeout: float, address):
        self.sentinel = sentinel
        self.name = name
        self.kwargs = kwargs
        self.timeout = timeout
        self.address = address
        self.replicas = 0

    def check_connection(self, wire) -> None:
        """A new connection reached the primary the Sentinels named, and it still serves as one."""
        role = reply_or_raise(wire.call([(b'ROLE',)])[0])
        if wire.peer != self.address:
            raise StoreError(f'the primary of service {self.name} changed from {host_port(self.address)} to '
                             f'{host_port(wire.peer)} while the module connected (a Sentinel failover); re-run')
        if as_text(role[0]) != 'master':
            raise StoreError(f'{host_port(self.address)}, the primary of service {self.name}, now serves as '
                             f'{as_text(role[0])} (a Sentinel failover); re-run when the failover is done')
        self.replicas = max(self.replicas, len(role[2]))

    @property
    def wait_ms(self) -> int:
        """How long WAIT waits: within the socket's ``timeout``, so that its answer (short) arrives rather than a timeout."""
        return max(1, int(self.timeout * 800))

    def checks(self) -> list:
        """The commands sent after each delete: WAIT for every replica (when there are any), then ROLE."""
        commands = [(b'WAIT', self.replicas, self.wait_ms)] if self.replicas else []
        return commands + [(b'ROLE',)]

    def confirmed(self, answers) -> bool:
        """Whether the answers of checks() say every replica holds the deletes and the server is still primary."""
        for answer in answers:
            if isinstance(answer, Exception):
                return False
            if isinstance(answer, int) and answer < self.replicas:
                return False
            if isinstance(answer, list) and as_text(answer[0]) != 'master':
                return False
        return True

    def confirm_restore(self, wire) -> None:
        """The restore's writes are held by every replica and the server is still primary (checks()), or stop.

        The rule of the sweep's deletes: a write a primary took after a failover demoted it
        is lost when it resyncs, so a restore is done only when it is confirmed.
        """
        answers = wire.call(self.checks())
        if self.confirmed(answers):
            return
        old = host_port(self.address)
        if isinstance(answers[-1], list) and as_text(answers[-1][0]) != 'master':
            raise StoreError(f'{old}, the primary of service {self.name}, now serves as {as_text(answers[-1][0])} '
                             '(a Sentinel failover) and may lose the sessions it restored; re-run the restore when the '
                             'failover is done (it never overwrites a session that exists again)')
        raise StoreError(f'the replicas of {old} did not confirm the restored sessions in time (WAIT {self.replicas}); '
                         'check the replicas\' link to the primary, or raise timeout, then re-run the restore (it never '
                         'overwrites a session that exists again)')

    def current(self):
        """The primary the Sentinels name now: a new one as soon as they agree on it, else the same after ``timeout``."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            named = {view for view in redis_connection.sentinel_views(self.sentinel, self.name).values() if isinstance(view, tuple)}
            if len(named) == 1 and named != {self.address}:
                break
            time.sleep(0.2)
        return redis_connection.settled_master(self.sentinel, self.name, self.kwargs, self.timeout)

    def client(self, address):
        return redis.Redis(host=address[0], port=address[1], **self.kwargs)

    def holding(self, address, keys) -> set:
        """The keys that exist on the server at ``address``."""
        client = self.client(address)
        found = set()
        try:
            for start in range(0, len(keys), 1000):
                chunk = keys[start:start + 1000]
                pipe = client.pipeline(transaction=False)
                for key in chunk:
                    pipe.exists(key)
                found.update(key for key, exists in zip(chunk, pipe.execute()) if exists)
        except redis.RedisError as exc:
            raise StoreError(describe_redis_error(exc, host_port(address))) from None
        finally:
            client.close()
        return found

    def settle_on_current(self, job, victims, outcome):
        """Count the deletes of ``victims`` the primary named now confirms (the key is gone there).

        Returns that primary and how many deletes it does not confirm.
        """
        new = self.current()
        held = self.holding(new, [entry.key for entry, gone in zip(victims, outcome) if gone])
        confirmed = [gone and entry.key not in held for entry, gone in zip(victims, outcome)]
        job.settle(victims, confirmed)
        return new, sum(outcome) - sum(confirmed)

    def stopped(self, new, lost: int) -> str:
        """Why the sweep stopped after settle_on_current answered (``new``, ``lost``)."""
        old = host_port(self.address)
        if new != self.address:
            return (f'the primary of service {self.name} changed from {old} to {host_port(new)} during the sweep '
                    f'(a Sentinel failover); only the deletes {host_port(new)} confirms are counted ({lost} taken by the '
                    'old primary after it lost its role are lost, the sessions are still there and the backup says so); '
                    're-run to finish')
        return (f'the replicas of {old} did not confirm the deletes in time (WAIT {self.replicas}); {lost} deletes it '
                'does not hold are not counted; check the replicas\' link to the primary, or raise timeout, then re-run')

    def stop(self, job, victims, outcome) -> None:
        """A delete was not confirmed: count what the primary the Sentinels name now no longer holds, then stop.

        ``victims`` are what the deletes of the unconfirmed answer (and of the ones still in
        flight) may have removed, ``outcome`` whether each script said it did.
        """
        raise StoreError(self.stopped(*self.settle_on_current(job, victims, outcome)))

    def after_failure(self, job, unknown) -> None:
        """A connection failed, maybe because a failover demoted the server: the deletes of ``unknown`` lost their answers.

        They are counted by what the primary the Sentinels name now no longer holds; when that
        is another server, that is what stopped the sweep.
        """
        try:
            new, lost = self.settle_on_current(job, unknown, [True] * len(unknown))
        except StoreError:
            return  # no primary to ask: the unanswered deletes stay in the backup, uncounted
        if new != self.address:
            raise StoreError(self.stopped(new, lost))


def swap_on_primary(guard: SentinelGuard, script, key: bytes, expected: bytes, fields: dict) -> str:
    """The compare-and-set of RedisStore.swap_tokens (``script``) on the primary ``guard``'s Sentinels name now, confirmed there.

    The write is confirmed by WAIT for the primary's replicas, else by reading it back
    from the primary the Sentinels name after it; a write a failover lost is a failure
    that names the server that took it.
    """
    primary = redis_connection.settled_master(guard.sentinel, guard.name, guard.kwargs, guard.timeout)
    new_token = fields[b'refresh_token']
    client = guard.client(primary)
    try:
        replicas = len(client.role()[2])
        outcome = int(script.call(client, [key], [expected, new_token, *itertools.chain.from_iterable(fields.items())]))
        acked = client.wait(replicas, guard.wait_ms) if replicas and outcome == 1 else replicas
    except redis.RedisError as exc:
        raise StoreError(describe_redis_error(exc, host_port(primary))) from None
    finally:
        client.close()
    answer = {1: 'written', 2: 'already'}.get(outcome, 'conflict')
    if outcome != 1:
        return answer
    now = redis_connection.settled_master(guard.sentinel, guard.name, guard.kwargs, guard.timeout)
    if now == primary and acked >= replicas:
        return answer
    reader = guard.client(now)
    try:
        held = reader.hget(key, b'refresh_token')
    except redis.RedisError as exc:
        raise StoreError(f'the new refresh token was written to {host_port(primary)}, but the primary the Sentinels '
                         f'name now, {host_port(now)}, could not confirm it ({redis_error_text(exc)})') from None
    finally:
        reader.close()
    if held != new_token:
        raise StoreError(f'the new refresh token was written to {host_port(primary)}, which lost it: the primary the '
                         f'Sentinels name now, {host_port(now)}, does not hold it (a Sentinel failover)')
    return answer

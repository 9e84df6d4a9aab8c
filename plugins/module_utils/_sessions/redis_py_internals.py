# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every use of redis-py beyond its public API, in one place.

Each function below names what it relies on and the redis-py versions it is tested on:
5.0.0 (the floor of requirements.txt, the dependency-floors run) and 8.1.0 (the suite's
own, tests/requirements.txt). redis-py has no public API for any of them; where it has
one (a client's connection options: ``Redis.get_connection_kwargs()``) the callers use it.
A redis-py release that changes one of these fails the unit and functional tests that
exercise it (test_redis_wire_readers.py, test_sentinel_failover_mid_run.py,
test_cluster_reshard_mid_sweep.py, test_sweep_fast_paths.py).

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

try:
    import redis
except ImportError:
    redis = None  # only the Redis store uses this module, and it reports the missing library


def _needs_command_name() -> bool:
    """Whether this redis-py's ``ConnectionPool.get_connection`` wants a command name.

    redis-py 5.0 to 5.2 require one; 5.3 made it optional and deprecated passing it (a
    warning on every call up to 8.x). Read from ``redis.VERSION`` (public), not guessed
    from a TypeError. Tested on 5.0.0 (needs it) and 8.1.0 (does not).
    """
    return redis is not None and tuple(redis.VERSION[:2]) < (5, 3)


NEEDS_COMMAND_NAME = _needs_command_name()


def pooled_connection(pool):
    """A connection of ``pool`` for this process's pipelined commands only (release it to the pool when done).

    ``ConnectionPool.get_connection`` is public, its signature is not stable: see
    _needs_command_name. Tested on redis-py 5.0.0 and 8.1.0.
    """
    return pool.get_connection('PIPELINE') if NEEDS_COMMAND_NAME else pool.get_connection()


def connection_socket(connection):
    """The socket of a connected redis-py ``Connection`` (its private ``_sock``), or None when it has none.

    The documented fast path (redis_wire.py): hiredis parses the replies straight off this
    socket. redis-py names it ``_sock`` in 5.0.0 and 8.1.0 (tested); a release that renames
    it gets the public reader (``Connection.read_response``), the tested fallback.
    """
    return getattr(connection, '_sock', None)


def sentinel_clients(sentinel) -> list:
    """One redis-py client per Sentinel of a ``redis.sentinel.Sentinel``: its ``sentinels`` attribute.

    Every Sentinel is asked on its own (they may disagree right after a failover);
    ``Sentinel.discover_master`` stops at the first that answers. The attribute is a list
    of ``Redis`` clients in 5.0.0 and 8.1.0 (tested), not part of the documented API.
    """
    return list(sentinel.sentinels)


def refresh_slot_map(cluster_client) -> None:
    """Read a Redis Cluster's slot map again: ``RedisCluster.nodes_manager.initialize()``.

    redis-py does this itself when its own commands meet MOVED; the sweep's pipelined
    commands bypass it, so the map is read again when they meet one (it decides where a
    restore writes). ``nodes_manager`` and ``initialize()`` are the same in 5.0.0 and
    8.1.0 (tested), not part of the documented API.
    """
    cluster_client.nodes_manager.initialize()

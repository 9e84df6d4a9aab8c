"""Redis Cluster redirections while a sweep runs: followed within the batch, never a silent half-state.

Real redis-server cluster nodes on loopback. A slot migration done by hand (CLUSTER SETSLOT
IMPORTING/MIGRATING, MIGRATE of half the keys, a pause, the rest, SETSLOT NODE) while a
rate-limited sweep works through the slots answers its reads and deletes with ASK, MOVED and
TRYAGAIN; a replica failover (CLUSTER FAILOVER) makes the old primary answer MOVED. Either way
the sweep finishes, what it counts as deleted is what left the store and what its backup says
was deleted, a re-run finishes the job, and a restore brings every session back.
"""

from __future__ import annotations

import time

import pytest
from redis.crc import key_slot

from harness.backups import restorable
from harness.module_process import run_sweep, start_sweep, wait_sweep
from harness.servers import LOOPBACK, RedisClusterSet
from harness.sessions import PREFIX, dump_hashes, session

# Keys share hash tags, so that a batch holds several keys of one slot (one delete script per
# slot): half of a slot migrated then splits a script's keys between two nodes (TRYAGAIN).
TAGS = 120
SESSIONS = 24_000


def seed(cluster) -> dict:
    """SESSIONS expired sessions, written to each slot's primary with a pipeline of its own (much faster than a cluster pipeline)."""
    now = time.time()
    pipes = {node.port: node.client().pipeline(transaction=False) for node in cluster.primaries}
    owners = {slot: pipes[node.port] for node in cluster.primaries for slot in slots_of(node)}
    for i in range(SESSIONS):
        key = f'{PREFIX}{{t{i % TAGS}}}e{i}'
        owners[key_slot(key.encode())].hset(key, mapping=session(f'e{i}', str(int(now - 3600))))
    for pipe in pipes.values():
        pipe.execute()
    original = stored(cluster)
    assert len(original) == SESSIONS
    for node in cluster.nodes:
        node.client().config_resetstat()
    return original


def stored(cluster) -> dict:
    """Every session the cluster's primaries hold."""
    state = {}
    for node in cluster.primaries:
        state.update(dump_hashes(node.client()))
    return state


def redirections_answered(cluster) -> dict:
    """How many MOVED, ASK and TRYAGAIN replies the nodes gave since seed() (the harness's own commands get none)."""
    counts = {'MOVED': 0, 'ASK': 0, 'TRYAGAIN': 0}
    for node in cluster.nodes:
        stats = node.client().info('errorstats')
        for code in counts:
            counts[code] += stats.get(f'errorstat_{code}', {}).get('count', 0)
    return counts


def node_id(node) -> str:
    return node.client().execute_command('CLUSTER', 'MYID').decode()


def migrate(source, target, slot: int, count: int) -> int:
    """MIGRATE up to ``count`` keys of ``slot`` from source to target; how many moved."""
    keys = source.client().execute_command('CLUSTER', 'GETKEYSINSLOT', slot, count)
    if keys:
        source.client().execute_command('MIGRATE', LOOPBACK, target.port, '', 0, 5000, 'KEYS', *keys)
    return len(keys)


def move_slots(cluster, source, target, slots, hold: float) -> None:
    """Move ``slots`` from source to target as redis-cli does, but with half their keys moved and ``hold`` seconds between."""
    source_id, target_id = node_id(source), node_id(target)
    for slot in slots:
        target.client().execute_command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', source_id)
        source.client().execute_command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target_id)
    for slot in slots:
        held = len(source.client().execute_command('CLUSTER', 'GETKEYSINSLOT', slot, 100_000))
        migrate(source, target, slot, held // 2)
    time.sleep(hold)
    for slot in slots:
        while migrate(source, target, slot, 1000):
            pass
    for slot in slots:
        for node in [target, source] + [node for node in cluster.nodes if node not in (source, target)]:
            node.client().execute_command('CLUSTER', 'SETSLOT', slot, 'NODE', target_id)


def tagged_slots(source) -> list:
    """The slots of ``source`` that hold sessions."""
    return sorted({key_slot(f'{{t{tag}}}'.encode()) for tag in range(TAGS)} & set(slots_of(source)))


def slots_of(node) -> list:
    mine = []
    for first, last, owner, *_replicas in node.client().execute_command('CLUSTER', 'SLOTS'):
        if int(owner[1]) == node.port:
            mine.extend(range(int(first), int(last) + 1))
    return mine


def sweeping(process, backup, timeout: float = 60.0) -> None:
    """Wait until the sweep has backed up (so is deleting) a first batch, then check it still runs."""
    deadline = time.monotonic() + timeout
    while not (backup.exists() and backup.read_bytes().count(b'\n') > 100):
        assert process.poll() is None and time.monotonic() < deadline, 'the sweep ended or never began deleting'
        time.sleep(0.05)


def check_outcome(first, original, cluster, backup, args, tmp_path) -> None:
    """A finished first run whose count, store and backup agree; a re-run finishes; a restore brings everything back."""
    gone = set(original) - set(stored(cluster))
    assert first['_rc'] == 0, first.get('msg')
    assert first['deleted'] == len(gone) > 0
    assert set(restorable(backup)) == gone, 'the backup and the store disagree on what was deleted'

    rerun = run_sweep(tmp_path, None, state='swept', backup_path=str(backup), **args)
    assert rerun['_rc'] == 0, rerun.get('msg')
    assert first['deleted'] + rerun['deleted'] == SESSIONS and not stored(cluster)
    assert set(restorable(backup)) == set(original)

    back = run_sweep(tmp_path, None, state='restored', backup_path=str(backup), **args)
    assert back['_rc'] == 0 and back['restored'] == SESSIONS, back.get('msg')
    assert stored(cluster) == original


@pytest.mark.slow
def test_slot_migration_mid_sweep_is_followed_and_count_store_and_backup_agree(tmp_path):
    with RedisClusterSet(3, workdir=str(tmp_path / 'cluster')) as cluster:
        original = seed(cluster)
        source, target = cluster.nodes[0], cluster.nodes[1]
        slots = tagged_slots(source)
        assert len(slots) > 10
        backup = tmp_path / 'sessions.jsonl'
        args = dict(backend='redis_cluster', login_host=LOOPBACK, login_port=cluster.nodes[2].port)

        process = start_sweep(tmp_path, None, state='swept', backup_path=str(backup), batch_size=100, max_rate=4000,
                              **args)
        sweeping(process, backup)
        move_slots(cluster, source, target, slots, hold=2)
        assert process.poll() is None, 'the sweep ended before the migration did'
        first = wait_sweep(process)

        seen = redirections_answered(cluster)
        assert seen['ASK'] and seen['MOVED'], f'the sweep met no redirection ({seen}): the test proves nothing'
        check_outcome(first, original, cluster, backup, args, tmp_path)


@pytest.mark.slow
def test_replica_failover_mid_sweep_is_followed_and_count_store_and_backup_agree(tmp_path):
    with RedisClusterSet(3, workdir=str(tmp_path / 'cluster'), replicas=1) as cluster:
        original = seed(cluster)
        primary = cluster.primaries[0]
        replica = cluster.replica_of(primary)
        backup = tmp_path / 'sessions.jsonl'
        args = dict(backend='redis_cluster', login_host=LOOPBACK, login_port=primary.port)

        process = start_sweep(tmp_path, None, state='swept', backup_path=str(backup), batch_size=100, max_rate=4000,
                              **args)
        sweeping(process, backup)
        cluster.failover(replica)
        assert process.poll() is None, 'the sweep ended before the failover'
        first = wait_sweep(process)

        assert replica.client().role()[0] == b'master' and primary.client().role()[0] == b'slave'
        assert redirections_answered(cluster)['MOVED'], 'the sweep never met the failover: the test proves nothing'
        check_outcome(first, original, cluster, backup, args, tmp_path)

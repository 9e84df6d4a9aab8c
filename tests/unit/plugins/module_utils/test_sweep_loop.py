"""The sweep pipeline (sweep_pipeline.py) over a partition held in memory: the order of read, judge, back up, delete and settle."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep_pipeline import DELETES_AHEAD, EntryBatch, Partition, sweep_partition
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.model import Entry
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep import SweepError, SweepJob, SweepOptions, Sweeper

EXPIRED, VALID = b'1000000000', b'4102444800'  # 2001, 2100


def session(expiry):
    return {b'expires_at': expiry, b'refresh_token': b'rt', b'access_token': b'at'}


class MemoryPartition(Partition):
    """Sessions in a dict, read in pages; a delete removes a key only if its fields are still the ones read.

    ``events`` records ('read', keys), ('delete', keys) and ('settle', keys) in order;
    ``refuse`` names the deletes (counted from 1) the store refuses whole; ``deferred``
    answers prepare() with the next batch, as a store that reads TTLs does.
    """

    backend = 'memory'
    location = 'memory'

    def __init__(self, sessions, events, refuse=(), deferred=False):
        self.data = dict(sessions)
        self.events = events
        self.refuse = set(refuse)
        self.deferred = deferred
        self.sent = 0
        self.most_in_flight = 0
        self._pages = self._in_flight = self._waiting = None
        self.reading = False

    # the store's side, for Sweeper
    def partitions(self):
        return [self]

    @staticmethod
    def session_id(key):
        return key.decode()

    @contextlib.contextmanager
    def open(self, job):
        keys = sorted(self.data)
        size = job.options.batch_size
        self._pages = collections.deque(keys[start:start + size] for start in range(0, len(keys), size))
        self._in_flight = collections.deque()
        self._waiting = None
        self.reading = bool(self._pages)
        yield

    def next_batch(self):
        if not self._pages and self._waiting is None:
            return None
        ready, self._waiting = self._waiting, None
        keys = self._pages.popleft() if self._pages else []
        self.reading = bool(self._pages)
        entries = [Entry(key, 'hash', dict(self.data[key])) for key in keys if key in self.data]
        if keys:
            self.events.append(('read', keys))
        return EntryBatch(entries, ready=ready)

    def prepare(self, victims):
        if not self.deferred:
            return victims
        self._waiting = victims
        return None

    def send_delete(self, victims):
        self.sent += 1
        self.events.append(('delete', [entry.key for entry in victims]))
        refused = self.sent in self.refuse
        outcome = []
        for entry in victims:
            same = not refused and self.data.get(entry.key) == entry.fields
            if same:
                del self.data[entry.key]
            outcome.append(same)
        self._in_flight.append((victims, outcome, refused))
        self.most_in_flight = max(self.most_in_flight, len(self._in_flight))

    @property
    def deletes_in_flight(self):
        return len(self._in_flight)

    def settle_oldest(self, job):
        victims, outcome, refused = self._in_flight.popleft()
        self.events.append(('settle', [entry.key for entry in victims]))
        if refused:
            job.abandon(victims)
            raise StoreError('the memory store refused a delete', refused=True)
        job.settle(victims, outcome)


class SlowBackup(concurrent.futures.Future):
    """A backup write that becomes durable only when the loop waits for it (('durable', keys) then)."""

    def __init__(self, events, keys):
        super().__init__()
        self.events = events
        self.keys = keys

    def done(self):
        return False

    def result(self, timeout=None):
        if not super().done():
            self.events.append(('durable', self.keys))
            self.set_result(None)
        return super().result(timeout)


class RecordingWriter:
    """A backup writer that records what it was asked to write, in the partition's event list."""

    def __init__(self, events):
        self.events = events
        self.not_deleted = []

    def start_entries(self, entries):
        keys = [entry.key for entry in entries]
        self.events.append(('backup', keys))
        return SlowBackup(self.events, keys)

    def write_not_deleted(self, entries):
        self.not_deleted.extend(entry.key for entry in entries)

    def close(self):
        pass


def sessions(expired, valid):
    data = {b's:e%03d' % i: session(EXPIRED) for i in range(expired)}
    data.update({b's:v%03d' % i: session(VALID) for i in range(valid)})
    return data


def sweep(partition, backup=True, **options):
    """(stats, writer) of one loop over ``partition``, as Sweeper runs it (without a backup file)."""
    options.setdefault('state', 'swept')
    sweeper = Sweeper(partition, SweepOptions(batch_size=4, **options))
    sweeper.writer = RecordingWriter(partition.events) if backup else None
    sweep_partition(SweepJob(sweeper, sweeper.stats, delete=sweeper.options.deleting), partition)
    return sweeper.stats, sweeper.writer


@pytest.mark.parametrize('deferred', [False, True], ids=['ready-at-once', 'ready-with-the-next-batch'])
def test_sweep_backs_up_every_victim_before_its_delete_is_sent(deferred):
    events = []
    partition = MemoryPartition(sessions(expired=10, valid=7), events, deferred=deferred)
    stats, _writer = sweep(partition)
    durable = set()
    for kind, keys in events:
        if kind == 'durable':
            durable.update(keys)
        elif kind == 'delete':
            assert set(keys) <= durable
    assert sorted(partition.data) == sorted(sessions(0, 7))
    assert (stats.scanned, stats.matched, stats.deleted) == (17, 10, 10)


def test_sweep_keeps_at_most_deletes_ahead_in_flight_and_settles_them_all():
    partition = MemoryPartition(sessions(expired=40, valid=0), [])
    stats, _writer = sweep(partition)
    assert partition.sent == 10 and partition.most_in_flight == DELETES_AHEAD
    assert partition.deletes_in_flight == 0 and stats.deleted == 40


def test_sweep_counts_a_session_changed_after_it_was_read_as_kept():
    events = []
    partition = MemoryPartition(sessions(expired=6, valid=0), events)
    real_send = partition.send_delete

    def refresh_first_then_send(victims):
        partition.data[victims[0].key] = session(VALID)
        real_send(victims)

    partition.send_delete = refresh_first_then_send
    stats, writer = sweep(partition)
    assert (stats.matched, stats.deleted, stats.changed_during_sweep) == (6, 4, 2)
    assert sorted(writer.not_deleted) == sorted(partition.data)


def test_sweep_abandons_a_refused_delete_counting_what_was_deleted_and_the_backup_saying_what_was_kept():
    events = []
    partition = MemoryPartition(sessions(expired=20, valid=0), events, refuse={2})
    sweeper = Sweeper(partition, SweepOptions(state='swept', batch_size=4))
    writer = sweeper.writer = RecordingWriter(events)
    job = SweepJob(sweeper, sweeper.stats, delete=True)
    with pytest.raises(StoreError):
        sweep_partition(job, partition)
    deleted = set(sessions(20, 0)) - set(partition.data)
    backed_up = {key for kind, keys in events if kind == 'backup' for key in keys}
    assert sweeper.stats.deleted == len(deleted)
    assert set(writer.not_deleted) == backed_up - deleted
    refused = [keys for kind, keys in events if kind == 'delete'][1]
    assert set(refused) <= set(writer.not_deleted)


def test_sweep_never_deletes_more_than_the_allowance():
    partition = MemoryPartition(sessions(expired=10, valid=3), [])
    sweeper = Sweeper(partition, SweepOptions(state='swept', batch_size=4, backup=False))
    sweeper.allowance = 6
    sweep_partition(SweepJob(sweeper, sweeper.stats, delete=True), partition)
    assert sweeper.stats.deleted == 6 and len(partition.data) == 7


def test_sweep_refuses_before_deleting_when_more_than_max_delete_would_go():
    partition = MemoryPartition(sessions(expired=10, valid=3), [])
    with pytest.raises(SweepError, match='more than max_delete=9; no session was deleted'):
        Sweeper(partition, SweepOptions(state='swept', batch_size=4, backup=False, max_delete=9)).sweep()
    assert len(partition.data) == 13
    stats = Sweeper(partition, SweepOptions(state='swept', batch_size=4, backup=False, max_delete=10)).sweep()
    assert stats.deleted == 10 and len(partition.data) == 3


def test_sweep_in_check_mode_counts_and_deletes_nothing():
    events = []
    partition = MemoryPartition(sessions(expired=10, valid=3), events)
    stats, _writer = sweep(partition, check_mode=True)
    assert (stats.scanned, stats.matched, stats.deleted) == (13, 10, 0)
    assert len(partition.data) == 13
    assert [kind for kind, _keys in events] == ['read'] * 4

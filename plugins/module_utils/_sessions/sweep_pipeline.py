# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one sweep pipeline: read a batch, judge it, back it up, delete the unchanged victims, settle.

Every store runs this pipeline (SweepPipeline) over its partitions (a Redis server, each primary of a Redis
Cluster, an etcd cluster); what differs between stores sits behind Partition. The pipeline
overlaps its stages where the store allows it: the reads of batch n+1 are under way while
batch n is judged, a batch's backup is written by the backup thread while later batches
are read, and at most DELETES_AHEAD deletes are in flight. A batch's backup is durable
(fsynced) before its delete is sent.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import collections

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError

# Deletes sent before the answers of earlier ones are read: the server runs the next one
# while this process reads what the last one did.
DELETES_AHEAD = 2


class Batch:
    """One read of a partition, as the judge (SweepJob.judge_batch) takes it.

    ``keys`` are the keys the read returned. ``raw_expiries(name)`` answers (keys, raws) for
    the sessions whose field ``name`` the store could read without building them (``raws[i]``
    the value as stored, None when missing); ``entries(positions)`` builds the entries of
    those sessions at ``positions`` (the victims) and only them. ``other_entries()`` builds
    every other key read (sessions of another shape, keys of other types);
    ``all_entries()`` every key, for a judge that needs whole sessions.
    ``ready`` holds the victims of an earlier batch that Partition.prepare answered later,
    now fit for the backup (None: none).
    """

    keys = ()
    ready = None

    def raw_expiries(self, name: bytes):  # pylint: disable=unused-argument
        return (), ()

    def entries(self, positions):  # pylint: disable=unused-argument
        return []

    def other_entries(self):
        return []

    def all_entries(self):
        return []


class EntryBatch(Batch):
    """A batch of a store that reads whole entries: the judge takes them all as other entries."""

    def __init__(self, entries, ready=None):
        self._entries = entries
        self.keys = [entry.key for entry in entries]
        self.ready = ready

    def other_entries(self):
        return self._entries

    def all_entries(self):
        return self._entries


class Partition:
    """What the pipeline asks of the part of a store it sweeps; each store's partition implements it.

    ``open(job)``: a context manager around the whole sweep of the partition: it connects
    (and readies the delete when ``job.deleting``), sends the first read, and on the way out
    turns the store's own errors into StoreError and closes what it opened.

    ``next_batch()``: the next Batch (the store may send the read after it before answering,
    so the server reads while this process judges), or None when nothing is left to read or
    to answer. ``reading``: whether reads are still under way after that answer.

    ``prepare(victims)``: the victims as the backup needs them, or None when the store was
    asked for what they lack (a TTL): they come back as ``ready`` of a later batch.

    ``send_delete(victims)``: delete each victim only if it is unchanged since it was read
    (a pipelined store sends the request and reads the answer later; a synchronous one, etcd,
    runs it and keeps the answer). ``deletes_in_flight``: how many deletes were sent and not
    settled. ``settle_oldest(job)``: find out what the oldest one did and ``job.settle`` it;
    when the store refused a request, ``job.abandon`` the victims it never touched, and raise
    the refusal unless send_delete raised it already.

    ``after_failure(job, exc)``: the pipeline stopped on ``exc`` and settled the deletes in
    flight as far as the store could say; a store that can tell more (a failover) raises
    the StoreError that says what stopped the sweep.

    A restore (sweep.restore) asks each partition for ``restore(entries)``: write back the
    entries whose keys do not exist (1 restored, 0 exists, -1 its TTL ran out), and in check
    mode ``would_restore(entries)``: the same answers, without writing.
    """

    reading = False

    def open(self, job):
        raise NotImplementedError

    def next_batch(self):
        raise NotImplementedError

    def prepare(self, victims):
        return victims

    def send_delete(self, victims):
        raise NotImplementedError

    @property
    def deletes_in_flight(self) -> int:
        raise NotImplementedError

    def settle_oldest(self, job):
        raise NotImplementedError

    def after_failure(self, job, exc):  # pylint: disable=unused-argument
        return None


def sweep_partition(job, partition: Partition) -> None:
    """Sweep one partition for ``job`` (a SweepJob): count, and when ``job.deleting``, back up and delete."""
    SweepPipeline(job, partition).run()


class SweepPipeline:
    """The stages of one partition's sweep for ``job`` (a sweep.SweepJob), overlapped as the module docstring says.

    ``backing`` holds the victims whose backup is written (or queued) and whose delete is
    not sent yet, oldest first, each with its backup write.
    """

    def __init__(self, job, partition: Partition):
        self.job = job
        self.partition = partition
        self.backing = collections.deque()  # (victims, their backup write), oldest first

    def run(self) -> None:
        with self.partition.open(self.job):
            try:
                while self._step():
                    pass
            except Exception as exc:
                self._stop(exc)
                raise
            while self.partition.deletes_in_flight:
                self.partition.settle_oldest(self.job)

    def _step(self) -> bool:
        """One turn: the next batch read, the oldest durable backup's delete sent, the batch judged; False when done."""
        job, partition, backing = self.job, self.partition, self.backing
        batch = partition.next_batch()
        if batch is None and not backing:
            return False
        if batch is not None and batch.ready:
            backing.append((batch.ready, job.start_backup(batch.ready)))
        # the oldest backup's delete once it is durable (waited for when a second backup
        # is queued behind it, or when nothing is left to read)
        if backing and (len(backing) > 1 or not partition.reading or job.backup_done(backing[0][1])):
            if partition.deletes_in_flight >= DELETES_AHEAD:
                partition.settle_oldest(job)
            job.finish_backup(backing[0][1])
            partition.send_delete(backing.popleft()[0])
        if batch is not None and batch.keys:
            victims = job.judge_batch(batch)
            if job.backing_up:
                ready = partition.prepare(victims)
                if ready:
                    backing.append((ready, job.start_backup(ready)))
            elif job.deleting and victims:
                backing.append((victims, None))
        return True

    def _stop(self, exc: Exception) -> None:
        """Whatever stopped the sweep (the store, the backup, the identity provider): count what can be counted.

        The backup says which backed-up victims were never sent, and the deletes in flight
        are counted if the store can still say (one whose answer is lost stays in the backup:
        restore never overwrites a session that is still there).
        """
        job, partition = self.job, self.partition
        for victims, pending in self.backing:
            job.abandon(victims, pending)
        try:
            while partition.deletes_in_flight:
                partition.settle_oldest(job)
        except StoreError:
            raise  # the store says what stopped the sweep (a failover), counted where it can be
        except Exception:  # pylint: disable=broad-except  # the first error is the one to report
            pass
        partition.after_failure(job, exc)

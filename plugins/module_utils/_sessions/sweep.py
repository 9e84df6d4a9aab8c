# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Report, sweep and restore vLLM sessions in any store.

The order of every batch is: read, judge, write the backup lines and fsync them,
then delete conditionally on the server (sweep_pipeline.py runs that order; SweepJob here
makes its decisions: which entries go, what is counted, what the backup says).
If the store dies mid-sweep, the backup holds exactly what was deleted so far and
a re-run finishes the job.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import json
import operator
import threading
import time

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import BackupError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.backup import INVALID_SAMPLES, BackupReader, BackupWriter, header, prepare_backup_path
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep_pipeline import sweep_partition
from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import iso_utc, parse_expiries, parse_expiry

SAMPLE_SIZE = 10
REFRESH_TOKEN_FIELD = b'refresh_token'

KEEP, MATCH, MALFORMED, WRONG_TYPE = 'keep', 'match', 'malformed', 'wrong_type'
_KEY_OF_ENTRY = operator.attrgetter('key')


class SweepError(Exception):
    """The sweep stopped; the message is one line and says what was deleted and what to do.

    ``stats`` counts what the sweep did before it stopped (every delete the server answered).
    """

    def __init__(self, message: str, stats=None):
        super().__init__(message)
        self.stats = stats


class RestoreError(StoreError):
    """The restore stopped; ``restored`` counts the sessions it had written before (a change, already made)."""

    def __init__(self, message: str, restored: int):
        super().__init__(message)
        self.restored = restored


class SweepOptions:
    def __init__(self, state='reported', select='expired', cutoff=None, malformed='keep', expires_field='expires_at',
                 batch_size=1000, max_rate=0, max_delete=None, backup_path=None, backup=True, check_mode=False,
                 introspector=None, watched_session=None):
        self.state = state
        self.select = select
        self.cutoff = time.time() if cutoff is None else cutoff
        self.malformed = malformed
        self.expires_field = expires_field.encode('utf-8')
        self.batch_size = batch_size
        self.max_rate = max_rate
        self.max_delete = max_delete
        self.backup_path = backup_path
        self.backup = backup
        self.check_mode = check_mode
        self.introspector = introspector
        # one session id whose selection is told apart (the diagnosis's probe session), or None
        self.watched_session = watched_session

    @property
    def deleting(self) -> bool:
        return self.state == 'swept' and not self.check_mode

    @property
    def sweeps_malformed(self) -> bool:
        """Whether malformed sessions and removable wrong-type entries go too (``malformed: sweep``)."""
        return self.malformed == 'sweep'

    @property
    def guard_fields(self):
        """Fields compared at delete time: a refresh always rewrites both."""
        return [self.expires_field, REFRESH_TOKEN_FIELD]


class Stats:
    """Counters shared by the partition workers."""

    def __init__(self):
        self.lock = threading.Lock()
        self.scanned = self.matched = self.deleted = self.malformed = self.wrong_type = 0
        self.changed_during_sweep = 0
        self.earliest = self.latest = None
        self.sample_ids = []
        self.watched_matched = False

    def add_expiry(self, expiry: float) -> None:
        if self.earliest is None or expiry < self.earliest:
            self.earliest = expiry
        if self.latest is None or expiry > self.latest:
            self.latest = expiry


class RateLimiter:
    """At most ``rate`` entries per second across all workers (0: unlimited)."""

    def __init__(self, rate: float):
        self.rate = rate
        self.start = time.monotonic()
        self.count = 0
        self.lock = threading.Lock()

    def consume(self, count: int) -> None:
        if not self.rate:
            return
        with self.lock:
            self.count += count
            due = self.start + self.count / self.rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def session_fields(entry):
    """The session's fields (Redis hash, or an etcd JSON object), or None when it is not a session object."""
    if entry.kind == 'hash':
        return entry.fields
    if entry.kind == 'json':
        try:
            document = json.loads(entry.value)
        except ValueError:
            return None
        if not isinstance(document, dict):
            return None
        return {str(name).encode('utf-8'): _json_scalar_bytes(value) for name, value in document.items()}
    return None


def _json_scalar_bytes(value) -> bytes:
    return value.encode('utf-8') if isinstance(value, str) else json.dumps(value).encode('utf-8')


def deletable_wrong_type(entry) -> bool:
    """Wrong-type entries a sweep may remove: ones whose exact bytes the backup can hold."""
    return entry.kind in ('string', 'json')


def judge_by_provider(fields, options: SweepOptions):
    """(verdict, expiry) of one entry when the identity provider decides (select revoked).

    ``fields`` is None for an entry that is not a session object. The selections the
    expiry alone decides are judged by SweepJob.judge_expiries.
    """
    if fields is None:
        return WRONG_TYPE, None
    raw = fields.get(options.expires_field)
    expiry = None if raw is None else parse_expiry(raw)
    if expiry is None:
        return MALFORMED, None
    token = fields.get(REFRESH_TOKEN_FIELD)
    if not token:
        return MALFORMED, expiry
    return (KEEP if options.introspector.active(token) else MATCH), expiry


def to_remove(verdict: str, entry, options: SweepOptions) -> bool:
    """Whether an entry judged ``verdict`` goes: a match always; a malformed session, or a wrong-type entry the backup
    can hold, only when malformed sessions are swept. The one rule for malformed sessions (``entry`` is read for a
    wrong-type verdict only)."""
    if verdict == MATCH:
        return True
    if not options.sweeps_malformed:
        return False
    return verdict == MALFORMED or (verdict == WRONG_TYPE and deletable_wrong_type(entry))


def judge_each(entries, options: SweepOptions):
    """(malformed, wrong type, expiries read, victims) of entries judged one by one (judge_by_provider, to_remove)."""
    malformed = wrong_type = 0
    expiries = []
    victims = []
    for entry in entries:
        verdict, expiry = judge_by_provider(session_fields(entry), options)
        if expiry is not None:
            expiries.append(expiry)
        if verdict == MALFORMED:
            malformed += 1
        elif verdict == WRONG_TYPE:
            wrong_type += 1
        if to_remove(verdict, entry, options):
            victims.append(entry)
    return malformed, wrong_type, expiries, victims


@contextlib.contextmanager
def _rare_collections():
    """Run the garbage collector rarely while a sweep runs.

    A sweep makes millions of short-lived objects and no reference cycles, so the
    collector's default pace (a pass every 700 allocations, full passes over every
    object the module imported) costs time and frees nothing.
    """
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], 50_000), threshold[1], threshold[2])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


class SweepJob:
    """The decisions of one partition's sweep, batch by batch: which entries go, what is counted, what the backup says.

    The pipeline (sweep_pipeline.SweepPipeline) drives the order: for every batch it calls
    ``judge_batch``, then, when ``deleting``, ``start_backup`` and ``finish_backup``
    before the victims' delete is sent, ``settle`` with what the delete did, and
    ``abandon`` for victims whose delete is never sent or was refused.
    """

    def __init__(self, sweeper, stats: Stats, delete: bool):
        self.options = sweeper.options
        self.stats = stats
        self.deleting = delete
        self.backing_up = delete and sweeper.writer is not None
        self._writer = sweeper.writer
        self._limiter = sweeper.limiter
        self._session_id = sweeper.store.session_id
        self._take_allowance = sweeper.take_allowance

    @property
    def by_expiry(self) -> bool:
        """Whether the expiry alone decides (select expired or all): see judge_expiries."""
        return self.options.select in ('expired', 'all')

    def judge_batch(self, batch):
        """Count a batch (a sweep_pipeline.Batch) and return the entries to remove (never more than max_delete allows).

        When the expiry alone decides, the sessions whose expiry the store read raw are judged
        by it and only their victims become entries: half a sweep's sessions are usually kept,
        and building their entries would cost more than judging them.
        """
        if not self.by_expiry:
            return self._judge_each(batch.all_entries())
        keys, raws = batch.raw_expiries(self.options.expires_field)
        victims = batch.entries(self.judge_expiries(keys, raws)) if keys else []
        others = batch.other_entries()
        if others:
            victims.extend(self.judge(others))
        return victims

    def judge(self, entries):
        """Count a batch of entries and return the ones to remove (never more than max_delete allows)."""
        if not self.by_expiry:
            return self._judge_each(entries)
        name = self.options.expires_field
        sessions, raws, wrong_type = [], [], []
        for entry in entries:
            fields = session_fields(entry)
            if fields is None:
                wrong_type.append(entry)
            else:
                sessions.append(entry)
                raws.append(fields.get(name))
        victims = [sessions[position] for position in self.judge_expiries([entry.key for entry in sessions], raws)]
        if wrong_type:
            victims.extend(self._judge_each(wrong_type))
        return victims

    def _judge_each(self, entries):
        """judge, entry by entry: the identity provider's verdicts, and entries that are not sessions."""
        return self._count(len(entries), *judge_each(entries, self.options), _KEY_OF_ENTRY)

    def judge_expiries(self, keys, raws):
        """The rule of the selections the expiry alone decides (``by_expiry``), for a batch of sessions.

        ``raws[i]`` is the expiry field of the session at ``keys[i]`` (None: missing), as the
        store read it without building the session (judge_batch builds the victims only).
        Counts the batch; returns the positions to remove.
        """
        options = self.options
        cutoff = options.cutoff
        expiries = parse_expiries(raws)
        malformed = expiries.count(None)
        if options.select == 'all':
            positions = [position for position, expiry in enumerate(expiries) if expiry is not None]
        else:
            positions = [position for position, expiry in enumerate(expiries) if expiry is not None and expiry < cutoff]
        if malformed and to_remove(MALFORMED, None, options):
            positions = sorted(positions + [position for position, expiry in enumerate(expiries) if expiry is None])
        if malformed:
            expiries = [expiry for expiry in expiries if expiry is not None]
        return self._count(len(raws), malformed, 0, expiries, positions, keys.__getitem__)

    def _count(self, judged, malformed, wrong_type, expiries, victims, key_of):
        """Add a judged batch to the counts; the victims (entries, or positions: ``key_of`` names them) that may go."""
        stats = self.stats
        with stats.lock:
            stats.scanned += judged
            stats.malformed += malformed
            stats.wrong_type += wrong_type
            stats.matched += len(victims)
            if expiries:
                stats.add_expiry(min(expiries))
                stats.add_expiry(max(expiries))
            for victim in victims[:SAMPLE_SIZE - len(stats.sample_ids)]:
                stats.sample_ids.append(self._session_id(key_of(victim)))
            watched = self.options.watched_session
            if watched is not None and not stats.watched_matched:
                stats.watched_matched = any(self._session_id(key_of(victim)) == watched for victim in victims)
        self._limiter.consume(judged)
        return self._take_allowance(victims) if self.deleting else victims

    def start_backup(self, victims):
        """Start recording the victims; finish_backup(the answer) before any of them is deleted."""
        if self.backing_up and victims:
            return self._writer.start_entries(victims)
        return None

    @staticmethod
    def backup_done(pending) -> bool:
        """Whether a backup started by start_backup has finished (durable, or failed)."""
        return pending is None or pending.done()

    @staticmethod
    def finish_backup(pending) -> None:
        """Wait until a backup started by start_backup is durable (raises BackupError if it failed)."""
        if pending is not None:
            pending.result()

    def abandon(self, victims, pending=None) -> None:
        """Victims whose delete will never be sent, or that the server refused whole: the backup says they were kept.

        ``pending`` is their backup write when it may still be under way (None: durable, or none).
        """
        if not self.backing_up:
            return
        try:
            self.finish_backup(pending)
            self._writer.write_not_deleted(victims)
        except BackupError:
            pass  # the backup never held them all, or takes no more lines after a failed write: it keeps them

    def settle(self, victims, outcome) -> None:
        """Count what a delete did; record in the backup the victims it kept (refreshed or gone meanwhile)."""
        kept = [entry for entry, deleted in zip(victims, outcome) if not deleted]
        with self.stats.lock:
            self.stats.deleted += len(victims) - len(kept)
            self.stats.changed_during_sweep += len(kept)
        if self.backing_up:
            self._writer.write_not_deleted(kept)


class Sweeper:
    def __init__(self, store, options: SweepOptions):
        self.store = store
        self.options = options
        self.stats = Stats()
        self.limiter = RateLimiter(options.max_rate)
        self.writer = None
        self.allowance = None

    def take_allowance(self, victims):
        """Never delete more than max_delete, even if sessions expired between the count and the sweep."""
        if self.allowance is None:
            return victims
        with self.stats.lock:
            granted = victims[:max(0, self.allowance)]
            self.allowance -= len(granted)
        return granted

    def _run_partitions(self, stats: Stats, delete: bool) -> None:
        partitions = self.store.partitions()
        if len(partitions) == 1:
            sweep_partition(SweepJob(self, stats, delete), partitions[0])
            return
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(partitions)) as pool:
            futures = [pool.submit(sweep_partition, SweepJob(self, stats, delete), partition) for partition in partitions]
            for future in futures:
                future.result()

    def _check_max_delete(self) -> None:
        """A read-only pass: refuse before anything is deleted when too much would go."""
        counting = Stats()
        self._run_partitions(counting, delete=False)
        if counting.matched > self.options.max_delete:
            raise SweepError(
                f'{counting.matched} sessions would be removed, more than max_delete={self.options.max_delete}; '
                'no session was deleted: raise max_delete, or narrow select/cutoff')
        self.allowance = self.options.max_delete

    def sweep(self) -> Stats:
        options = self.options
        if options.deleting and options.backup:
            prepare_backup_path(options.backup_path, self.store.backend)
        with _rare_collections():
            if options.state == 'swept' and options.max_delete is not None:
                self._check_max_delete()
            if options.deleting and options.backup:
                self.writer = BackupWriter(options.backup_path,
                                           header(self.store.backend, self.store.location, time.time()))
            try:
                self._run_partitions(self.stats, delete=options.deleting)
            except (StoreError, BackupError) as exc:
                raise SweepError(self._interrupted(exc), self.stats) from None
            finally:
                if self.writer is not None:
                    self.writer.close()
        return self.stats

    def _interrupted(self, exc: Exception) -> str:
        if not self.stats.deleted:
            return f'{exc}; no session was deleted'
        where = f'the backup {self.options.backup_path} holds every one of them' if self.writer else 'no backup was kept'
        return f'{exc}; {self.stats.deleted} sessions were deleted before it stopped ({where}); re-run to finish'


RESTORE_BATCH = 1000


def restore(store, backup_path: str, check_mode: bool) -> dict:
    """Put back every session of a backup that does not exist again; never overwrite a live session.

    Only entries the sweep could have written are restored: keys under the store's
    pattern or prefix, of the types it backs up. Anything else, and lines that are not
    valid entries, is counted and named, never written. The file is read in batches,
    newest entries first.
    """
    counts = {'restored': 0, 'skipped_existing': 0, 'skipped_expired': 0, 'skipped_foreign': 0, 'skipped_invalid': 0,
              'in_backup': 0}
    foreign, refused = [], []
    try:
        _restore_file(store, backup_path, check_mode, counts, foreign, refused)
    except StoreError as exc:
        if not counts['restored'] or check_mode:
            raise
        raise RestoreError(f'{exc}; {counts["restored"]} sessions were restored before it stopped (a re-run never '
                           'overwrites them)', counts['restored']) from None
    counts['foreign_entries'] = foreign
    return counts


def _restore_file(store, backup_path: str, check_mode: bool, counts: dict, foreign: list, refused: list) -> None:
    with BackupReader(backup_path, store.backend) as reader:
        batch = []
        for entry in reader.entries():
            counts['in_backup'] += 1
            if not store.accepts(entry):
                counts['skipped_foreign'] += 1
                if len(foreign) < SAMPLE_SIZE:
                    foreign.append(f'{entry.kind} {entry.key[:100].decode("utf-8", "replace")}')
                continue
            batch.append(entry)
            if len(batch) == RESTORE_BATCH:
                _restore_batch(store, batch, check_mode, counts, refused)
                batch = []
        if batch:
            _restore_batch(store, batch, check_mode, counts, refused)
        counts['skipped_invalid'] += reader.invalid
        counts['invalid_lines'] = (reader.invalid_samples + refused)[:INVALID_SAMPLES]


_OUTCOMES = {1: 'restored', 0: 'skipped_existing', -1: 'skipped_expired', -2: 'skipped_invalid'}


def _restore_batch(store, entries, check_mode: bool, counts: dict, refused: list) -> None:
    for partition, group in store.group_by_partition(entries):
        outcomes = partition.would_restore(group) if check_mode else partition.restore(group)
        for entry, outcome in zip(group, outcomes):
            counts[_OUTCOMES[outcome]] += 1
            if outcome == -2 and len(refused) < INVALID_SAMPLES:
                refused.append(f'{entry.key[:100].decode("utf-8", "replace")}: the server refused its expiry '
                               f'(pexpireat {entry.pexpireat}); not restored')


def report(stats: Stats, options: SweepOptions, started: float) -> dict:
    return {
        'scanned': stats.scanned,
        'matched': stats.matched,
        'deleted': stats.deleted,
        'malformed': stats.malformed,
        'wrong_type': stats.wrong_type,
        'changed_during_sweep': stats.changed_during_sweep,
        'earliest_expiry': iso_utc(stats.earliest),
        'latest_expiry': iso_utc(stats.latest),
        'sample_ids': stats.sample_ids,
        'watched_matched': stats.watched_matched if options.watched_session is not None else None,
        'cutoff': iso_utc(options.cutoff),
        'duration_s': round(time.monotonic() - started, 3),
    }

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The on-disk SQLite token cache (token_cache.db): inspect, prune, purge, restore.

Every change is preceded by a 0600 backup of the database and its sidecar files,
taken while SQLite's write lock is held, so nothing is deleted that cannot be
put back. Counting and pruning run inside SQLite: rows never enter Python.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import urllib.parse

from ._files import BackupError, Sealing, check_private_dir, copy_private, ensure_backup_dir, file_digest, fsync_directory
from ._timestamps import EARLIEST_EPOCH, END_EPOCH, EPOCH_MILLIS_THRESHOLD, backup_stamp, iso_utc, parse_optional

SIDECAR_SUFFIXES = ('-wal', '-shm', '-journal')
SQLITE_MAGIC = b'SQLite format 3\x00'
# Where SQLite's unix VFS keeps its write locks: the RESERVED byte of the database file
# (rollback journal mode) and the WAL_WRITE_LOCK byte of the -shm file (WAL mode).
_RESERVED_BYTE = 0x40000001
_WAL_WRITE_LOCK_BYTE = 120
# How often a purge re-copies a file that a live writer changed under the backup.
_BACKUP_ATTEMPTS = 3
# The page cache of a prune's connection, in KiB (SQLite's default is 2,000): a DELETE of half a
# large cache and its VACUUM touch every page, and with the default they spill and re-read each
# page several times. 16 MiB: 32 and 64 MiB made a million-row prune no faster, and the module's
# peak stays near 76 MB (93 MB with 32 MiB).
_PRUNE_CACHE_KIB = 16384


class TokenCacheError(Exception):
    """A problem with the cache or the request; the message is one line with the fix."""


def cache_files(path: str) -> list[str]:
    """The database and every sidecar SQLite may keep beside it."""
    return [path] + [path + suffix for suffix in SIDECAR_SUFFIXES]


def existing_files(path: str) -> list[str]:
    return [name for name in cache_files(path) if os.path.lexists(name)]


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def expiry_epoch_sql(column: str) -> str:
    """SQL for a row's expiry in epoch seconds, or NULL when it cannot be read.

    Caches written by different clients store epoch seconds, epoch milliseconds
    or ISO 8601 text (with Z or an offset); all three are normalised in SQL so
    that a million-row cache is judged without loading a row into Python. A value
    outside the years 0001 to 9999 (``_timestamps.in_range``), an infinity among them,
    cannot be read either: such a row is malformed, never pruned, never reported.

    A number stored as a number is judged in line, and so is a date of the years 0002 to 9998
    (four digits and a dash first): no offset takes it out of the years 0001 to 9999, and
    julianday reads it as it reads it trimmed. Other text is trimmed once, in a subquery that
    SQLite does not flatten (LIMIT -1). Text of digits with at most one dot (a digit first) is
    a number of seconds or milliseconds; other text is read as a date, which is never taken
    for milliseconds (a date after the year 5138 stays in its year). The test for a number is
    made with ltrim and substr, not GLOB: a third of the cost of a row. Text that Python reads
    as a number but this test does not (a sign, an exponent, a leading dot) is malformed here:
    never pruned.
    """
    col = quote_identifier(column)
    is_number = ("ltrim(t, '0123456789.') = '' AND substr(t, 1, 1) BETWEEN '0' AND '9' "
                 "AND instr(substr(t, instr(t, '.') + 1), '.') = 0")
    date = f"(SELECT CASE WHEN s >= {EARLIEST_EPOCH!r} THEN s END FROM (SELECT {_date_seconds_sql('t')} AS s))"
    return (
        f"CASE typeof({col}) WHEN 'integer' THEN {_epoch_in_range_sql(col)} WHEN 'real' THEN {_epoch_in_range_sql(col)} "
        f"WHEN 'text' THEN CASE WHEN substr({col}, 5, 1) = '-' AND substr({col}, 1, 4) BETWEEN '0002' AND '9998' "
        f"THEN {_date_seconds_sql(col)} "
        f"ELSE (SELECT CASE WHEN {is_number} THEN {_epoch_in_range_sql('CAST(t AS REAL)')} ELSE {date} END "
        f"FROM (SELECT trim({col}) AS t LIMIT -1)) END END"
    )


def _date_seconds_sql(text: str) -> str:
    """SQL for the epoch seconds of the date ``text`` names (julianday's days since the Julian epoch), NULL when it
    names none."""
    return f"(julianday({text}) - 2440587.5) * 86400.0"


def _epoch_in_range_sql(number: str) -> str:
    """SQL for the epoch seconds of ``number`` (seconds, or milliseconds above EPOCH_MILLIS_THRESHOLD), NULL out of
    the years 0001 to 9999. Milliseconds are never below the earliest second, and seconds up to the threshold never
    reach the end (the threshold lies before it): each branch tests the one bound it can cross."""
    return (f"CASE WHEN {number} > {EPOCH_MILLIS_THRESHOLD} THEN CASE WHEN {number} / 1000.0 < {END_EPOCH!r} "
            f"THEN {number} / 1000.0 END WHEN {number} >= {EARLIEST_EPOCH!r} THEN {number} END")


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return 'locked' in text or 'busy' in text


class TokenCache:
    """One token cache file and the table/column that hold token expiries."""

    def __init__(self, path: str, table: str = 'tokens', expires_column: str = 'expires_at', lock_timeout: float = 5.0):
        self.path = path
        self.table = table
        self.expires_column = expires_column
        self.lock_timeout = lock_timeout

    # ---- reading -------------------------------------------------------------------------

    def _check_path(self) -> None:
        """Refuse a path every state would not read as the same file.

        A link at ``path`` or at a sidecar would be followed by SQLite (inspect,
        prune) but removed itself by a purge, leaving the tokens in its target: no
        state acts on a link. Links among the parent directories are harmless: every
        state reaches the same file through them.
        """
        for name in cache_files(self.path):
            if os.path.islink(name):
                what = f'path {name}' if name == self.path else f'{name} (a sidecar of path)'
                raise TokenCacheError(
                    f'{what} is a symbolic link to {os.readlink(name)}; give the real path of the cache file: '
                    'this module acts on no link, so that no state removes a link and leaves the tokens in its target'
                )
        if os.path.isdir(self.path):
            raise TokenCacheError(
                f'path {self.path} is a directory, not a token cache file; '
                f'set path to the SQLite file inside it, e.g. {os.path.join(self.path, "token_cache.db")}'
            )

    def _connect(self, readonly: bool) -> sqlite3.Connection:
        mode = 'ro' if readonly else 'rw'
        uri = f'file:{urllib.parse.quote(self.path)}?mode={mode}'
        return sqlite3.connect(uri, uri=True, timeout=self.lock_timeout, isolation_level=None)

    def _locked_error(self, exc: Exception) -> TokenCacheError:
        return TokenCacheError(
            f'token cache {self.path} is locked by another process ({exc}) for more than {self.lock_timeout:g}s; '
            'retry when the service is idle, stop it first, or raise lock_timeout'
        )

    @staticmethod
    def _tables(conn: sqlite3.Connection) -> list:
        return [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]

    def _check_schema(self, conn: sqlite3.Connection, tables: list) -> None:
        if self.table not in tables:
            found = ', '.join(tables) if tables else 'none'
            raise TokenCacheError(
                f'table {self.table!r} not found in {self.path} (tables: {found}); set table to the cache\'s token table'
            )
        columns = [row[1] for row in conn.execute(f'PRAGMA table_info({quote_identifier(self.table)})')]
        if self.expires_column not in columns:
            raise TokenCacheError(
                f'column {self.expires_column!r} not found in table {self.table!r} of {self.path} '
                f'(columns: {", ".join(columns)}); set expires_column to the column holding the token expiry'
            )

    def _count(self, conn: sqlite3.Connection, cutoff: float) -> dict:
        expiry = expiry_epoch_sql(self.expires_column)
        row = conn.execute(
            'SELECT count(*), '
            '       coalesce(sum(CASE WHEN e IS NULL THEN 1 ELSE 0 END), 0), '
            '       coalesce(sum(CASE WHEN e < :cutoff THEN 1 ELSE 0 END), 0), '
            '       min(e), max(e) '
            # LIMIT -1 keeps SQLite from flattening the subquery into the aggregate, which would
            # evaluate the expiry once per use of e (four times a row) instead of once.
            f'FROM (SELECT {expiry} AS e FROM {quote_identifier(self.table)} LIMIT -1)',
            {'cutoff': cutoff},
        ).fetchone()
        return {
            'rows': row[0],
            'malformed_rows': row[1],
            'expired_rows': row[2],
            'earliest_expiry': iso_utc(row[3]),
            'latest_expiry': iso_utc(row[4]),
        }

    @staticmethod
    def _integrity(conn: sqlite3.Connection) -> str:
        """'ok', or SQLite's first findings on one line (it heads them with the database's name, on a line of its own)."""
        problems = [row[0] for row in conn.execute('PRAGMA quick_check(5)')]
        if problems == ['ok']:
            return 'ok'
        return '; '.join(line for problem in problems for line in problem.splitlines() if not line.startswith('*** in database'))

    def _last_write(self) -> float:
        """When the cache was last written: with WAL, writes land in the -wal file first."""
        times = [os.stat(self.path).st_mtime]
        if os.path.exists(self.path + '-wal'):
            times.append(os.stat(self.path + '-wal').st_mtime)
        return max(times)

    def _staleness(self, last_write: float, restored_at: float | None) -> tuple[bool, str | None]:
        if restored_at is None:
            return False, None
        if last_write < restored_at:
            return True, (
                f'{os.path.basename(self.path)} was last written at {iso_utc(last_write)}, before the restore '
                f'completed at {iso_utc(restored_at)}: it holds tokens from the snapshot'
            )
        return False, None

    def inspect(self, cutoff: float, restored_at: float | None = None, count: bool = True) -> dict:
        """What the cache holds; reports (does not raise on) a file that is not a healthy database.

        ``count`` false: the rows are not counted and the file's integrity is not checked; a
        prune does both under its write lock (the check beside its judging of the rows, each
        expiry judged once for the count and the delete). Rows and the like, and integrity
        when the file opened and its schema was read, stay None.
        """
        self._check_path()
        info = {
            'path': self.path, 'exists': False, 'size_bytes': 0, 'mtime': None, 'stale': False,
            'stale_reason': None, 'integrity': None, 'rows': None, 'expired_rows': None,
            'malformed_rows': None, 'earliest_expiry': None, 'latest_expiry': None, 'empty': False,
            'files': existing_files(self.path),
        }
        if not os.path.exists(self.path):
            if restored_at is not None:
                info['stale_reason'] = 'no cache file: the service rebuilds it from fresh credentials'
            return info
        last_write = self._last_write()
        info.update(exists=True, size_bytes=os.path.getsize(self.path), mtime=iso_utc(last_write))
        info['stale'], info['stale_reason'] = self._staleness(last_write, restored_at)
        try:
            conn = self._connect(readonly=True)
        except sqlite3.Error as exc:
            info['integrity'] = str(exc)
            return info
        try:
            info['integrity'] = self._integrity(conn) if count else None
            tables = self._tables(conn) if info['integrity'] in ('ok', None) else None
            if tables:
                self._check_schema(conn, tables)
                if count:
                    info.update(self._count(conn, cutoff))
            elif tables is not None:
                info['integrity'] = info['integrity'] or self._integrity(conn)
                if info['integrity'] == 'ok':
                    # 0 bytes, or a database made before its table: what a service leaves when it
                    # recreates the file and has not written yet. It holds no token.
                    info.update(empty=True, rows=0, expired_rows=0, malformed_rows=0)
        except sqlite3.OperationalError as exc:
            if _is_lock_error(exc):
                raise self._locked_error(exc) from None
            info['integrity'] = str(exc)
        except sqlite3.DatabaseError as exc:
            info['integrity'] = str(exc)
        finally:
            conn.close()
        return info

    # ---- changing ------------------------------------------------------------------------

    def _backup_names(self, backup_dir: str) -> dict:
        stem = os.path.join(backup_dir, f'{os.path.basename(self.path)}.{backup_stamp()}.bak')
        return {name: stem + name[len(self.path):] for name in cache_files(self.path)}

    def _backup(self, backup_dir: str | None, durable: bool = True) -> list[str]:
        """Copy the database and its sidecars; the caller holds the write lock or checks for changes.

        ``durable=False``: the copies are not yet on stable storage; the caller seals them (``Sealing``)
        and waits for that before it commits a change."""
        directory = ensure_backup_dir(backup_dir or os.path.dirname(os.path.abspath(self.path)))
        written = []
        try:
            for source, destination in self._backup_names(directory).items():
                if os.path.exists(source):
                    copy_private(source, destination, follow_links=False, durable=durable)
                    written.append(destination)
        except BackupError:
            for name in written:
                os.unlink(name)
            raise
        return written

    def _begin_immediate(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute('BEGIN IMMEDIATE')
        except sqlite3.OperationalError as exc:
            if _is_lock_error(exc):
                raise self._locked_error(exc) from None
            raise

    def prune(self, before: dict, cutoff: float, backup: bool, backup_dir: str | None, check_mode: bool) -> dict:
        """Delete rows that expired before ``cutoff``, then VACUUM (``before`` is inspect() at that cutoff).

        When ``before`` holds no counts (inspect(count=False)), the rows are counted here,
        under the write lock, in the one pass that judges each row's expiry: the count and
        the delete are of the same rows, and the result's counts are the ones at the delete.
        The file's integrity is checked here, under the same lock, on a connection of its own
        beside the judging, and before anything is deleted.
        """
        result = {'removed_rows': 0, 'backup_files': [], 'warnings': []}
        if not before['exists']:
            return result
        if before['integrity'] not in ('ok', None):
            raise self._unhealthy(before['integrity'])
        if before['rows'] is not None and not before['expired_rows']:
            return result
        if check_mode:
            result['removed_rows'] = before['expired_rows']
            return result
        conn = self._connect(readonly=False)
        try:
            conn.execute(f'PRAGMA cache_size = -{_PRUNE_CACHE_KIB}')
            self._begin_immediate(conn)
            try:
                # Under the write lock: nothing can be written between the count, the backup and the delete.
                keys = self._judge_checked(conn)
                result.update(self._count_judged(conn, cutoff), integrity='ok')
                if result['expired_rows']:
                    result.update(self._delete_backed_up(conn, keys, cutoff, backup, backup_dir))
                conn.execute('DROP TABLE temp.vllm_dr_judged')
                conn.execute('COMMIT')
            except BaseException:
                conn.execute('ROLLBACK')
                raise
            # VACUUM builds the new file in a temporary database: on disk, as SQLite does by default,
            # not in this process's memory (the whole file, 90 MB of a million-row cache)
            conn.execute('PRAGMA temp_store = DEFAULT')
            if result['removed_rows']:
                try:
                    conn.execute('VACUUM')
                except sqlite3.OperationalError as exc:
                    result['warnings'].append(f'rows were removed but VACUUM did not run ({exc}); the file shrinks on '
                                              'the next prune')
        except BackupError as exc:
            raise TokenCacheError(str(exc)) from None
        finally:
            conn.close()
        return result

    def _unhealthy(self, integrity: str) -> TokenCacheError:
        return TokenCacheError(
            f'token cache {self.path} is not a healthy SQLite database ({integrity}); '
            'state=pruned cannot repair it: use state=absent to purge it (a backup is kept)'
        )

    def _judge_checked(self, conn: sqlite3.Connection) -> list:
        """_judge, with the file's integrity checked beside it; raises on a damaged file."""
        wait = self._integrity_aside()
        try:
            keys, failure = self._judge(conn), None
        except sqlite3.DatabaseError as exc:
            keys, failure = None, exc
        integrity = wait()
        if integrity != 'ok':
            raise self._unhealthy(integrity)
        if failure is not None:
            raise failure
        return keys

    def _integrity_aside(self):
        """Start PRAGMA quick_check on a read-only connection in a thread of its own (SQLite works without the GIL);
        the function returned waits for it and gives 'ok' or what is wrong."""
        outcome = []

        def check():
            try:
                conn = self._connect(readonly=True)
                try:
                    outcome.append(self._integrity(conn))
                finally:
                    conn.close()
            except sqlite3.Error as exc:
                outcome.append(str(exc))

        thread = threading.Thread(target=check, name='cache-integrity', daemon=True)
        thread.start()

        def wait():
            thread.join()
            return outcome[0] if outcome else 'the integrity check stopped without an answer'
        return wait

    def _delete_backed_up(self, conn: sqlite3.Connection, keys: list, cutoff: float, backup: bool,
                          backup_dir: str | None) -> dict:
        """The judged rows deleted (not yet committed) after the files are copied; the copies are made durable and
        hashed while the DELETE runs, and the DELETE is kept only once they are."""
        if not backup:
            return {'removed_rows': self._delete_judged(conn, keys, cutoff)}
        sealing = Sealing(self._backup(backup_dir, durable=False))
        try:
            removed = self._delete_judged(conn, keys, cutoff)
        finally:
            checksums = sealing.wait()  # raises (the caller rolls the DELETE back) when a copy cannot be made durable
        return {'removed_rows': removed, 'backup_files': sealing.paths, 'backup_checksums': checksums}

    def _row_keys(self, conn: sqlite3.Connection) -> list:
        """The columns that name one row of the table: its rowid (under a name no column takes), or, in a WITHOUT ROWID
        table, its primary key."""
        info = list(conn.execute(f'PRAGMA table_info({quote_identifier(self.table)})'))
        columns = {row[1].lower() for row in info}
        alias = next((name for name in ('rowid', '_rowid_', 'oid') if name not in columns), None)
        if alias is not None:
            try:
                conn.execute(f'SELECT {alias} FROM {quote_identifier(self.table)} LIMIT 0')
                return [alias]
            except sqlite3.OperationalError:
                pass  # a WITHOUT ROWID table
        return [quote_identifier(row[1]) for row in sorted((row for row in info if row[5]), key=lambda row: row[5])]

    def _judge(self, conn: sqlite3.Connection) -> list:
        """Each row's expiry judged once, with the key of its row, into a temporary table; the key's columns."""
        keys = self._row_keys(conn)
        if not keys:
            raise TokenCacheError(f'table {self.table!r} of {self.path} has neither a rowid nor a primary key; '
                                  'state=pruned cannot name its rows: use state=absent to purge the cache (a backup is kept)')
        # the judged rows in memory (about 20 MB for a million rows), not in a temporary file written and read back
        conn.execute('PRAGMA temp_store = MEMORY')
        named = ', '.join(f'{key} AS k{index}' for index, key in enumerate(keys))
        conn.execute(f'CREATE TEMP TABLE vllm_dr_judged AS SELECT {named}, '
                     f'{expiry_epoch_sql(self.expires_column)} AS e FROM {quote_identifier(self.table)}')
        return keys

    @staticmethod
    def _count_judged(conn: sqlite3.Connection, cutoff: float) -> dict:
        row = conn.execute('SELECT count(*), count(*) - count(e), count(CASE WHEN e < :cutoff THEN 1 END), min(e), max(e) '
                           'FROM temp.vllm_dr_judged', {'cutoff': cutoff}).fetchone()
        return {'rows': row[0], 'malformed_rows': row[1], 'expired_rows': row[2],
                'earliest_expiry': iso_utc(row[3]), 'latest_expiry': iso_utc(row[4])}

    def _delete_judged(self, conn: sqlite3.Connection, keys: list, cutoff: float) -> int:
        """Delete the rows judged expired, by their keys: the expiry is not read again."""
        named = ', '.join(f'k{index}' for index in range(len(keys)))
        target = keys[0] if len(keys) == 1 else f'({", ".join(keys)})'
        return conn.execute(f'DELETE FROM {quote_identifier(self.table)} WHERE {target} IN '
                            f'(SELECT {named} FROM temp.vllm_dr_judged WHERE e < :cutoff)', {'cutoff': cutoff}).rowcount

    def _check_no_writer(self) -> None:
        """Refuse to purge or replace the cache while a transaction is writing to it.

        Asked through SQLite's own file locks rather than by opening the database: a
        connection closed here would checkpoint and delete the -wal file before its backup.
        """
        deadline = time.monotonic() + self.lock_timeout
        while _writer_active(self.path):
            if time.monotonic() >= deadline:
                raise self._locked_error('a write transaction is open')
            time.sleep(0.05)

    def _backup_unchanged(self, backup_dir: str | None) -> list[str]:
        """Back up the files; copy again when a live writer changed them meanwhile."""
        for _attempt in range(_BACKUP_ATTEMPTS):
            before = _signatures(self.path)
            written = self._backup(backup_dir)
            if _signatures(self.path) == before:
                return written
            for name in written:
                os.unlink(name)
        raise TokenCacheError(
            f'token cache {self.path} kept changing while it was backed up ({_BACKUP_ATTEMPTS} attempts); '
            'stop the service before purging, then re-run'
        )

    def purge(self, found: dict, backup: bool, backup_dir: str | None, check_mode: bool) -> dict:
        """Remove the database and its sidecars (after the backup), damaged or not (``found`` is inspect()).

        Refuses a file that is not SQLite at all: it may not be the cache. An empty cache
        (``found['empty']``) holds no token, so there is nothing to back up.
        """
        self._check_path()
        self._check_is_sqlite()
        files = existing_files(self.path)
        result = {'removed_files': [], 'backup_files': [], 'warnings': []}
        if found['empty']:
            result['msg'] = (f'{self.path} held no token table (an empty database): '
                             f'{"it would be" if check_mode else "it was"} removed with no backup, there was nothing to back up')
        if not files or check_mode:
            result['removed_files'] = files
            return result
        self._check_no_writer()
        try:
            if backup and not found['empty']:
                result['backup_files'] = self._backup_unchanged(backup_dir)
        except BackupError as exc:
            raise TokenCacheError(str(exc)) from None
        for name in existing_files(self.path):
            os.unlink(name)
            result['removed_files'].append(name)
        fsync_directory(os.path.dirname(os.path.abspath(self.path)))
        return result

    def _check_is_sqlite(self) -> None:
        if os.path.isfile(self.path) and os.path.getsize(self.path) and not _looks_like_sqlite(self.path):
            raise TokenCacheError(
                f'path {self.path} is not an SQLite database (no SQLite header), so it may not be the token cache; '
                'nothing was removed: check path, or remove the file yourself if it is the cache'
            )

    def restore(self, restore_from: str, backup: bool, backup_dir: str | None, check_mode: bool,
                merge: bool = True) -> dict:
        """Put a backup taken by prune/purge back; the current files are backed up first.

        With ``merge`` and a cache that holds rows now (written since the run), the backup's rows missing from it are
        put back into it and every row and file written since is kept (merged()); a cache that cannot be merged is
        refused, naming the rows replacing it would lose. Without ``merge``, or with no rows now, the files are
        replaced.
        """
        self._check_path()
        sources = _backup_set(restore_from, self.path)
        wanted = {target: source for target, source in sources.items() if source is not None}
        current = existing_files(self.path)
        result = {'restored_files': [], 'removed_files': [], 'backup_files': [], 'warnings': [], 'restored_rows': 0,
                  'kept_rows': 0}
        identical = set(current) == set(wanted) and all(
            file_digest(target) == file_digest(source) for target, source in wanted.items()
        )
        if identical:
            return result
        kept = self._rows_now() if current else 0
        if merge and kept:
            return self._merge(wanted, kept, backup, backup_dir, check_mode, result)
        result['restored_files'] = sorted(wanted)
        result['removed_files'] = sorted(set(current) - set(wanted))
        if not _looks_like_sqlite(restore_from):
            result['warnings'].append(f'{restore_from} is not an SQLite database: a damaged cache is being put back')
        if check_mode:
            return result
        try:
            if backup and current:
                self._check_no_writer()
                result['backup_files'] = self._backup_unchanged(backup_dir)
            owner = _ownership(self.path)
            for target in result['removed_files']:
                os.unlink(target)
            for target, source in wanted.items():
                _replace_from(source, target, owner)
        except BackupError as exc:
            raise TokenCacheError(str(exc)) from None
        fsync_directory(os.path.dirname(os.path.abspath(self.path)))
        return result

    def _rows_now(self) -> int:
        """Rows the token table holds now (0 when there is no such table); -1 when the file cannot be read as
        a token cache: it may hold what the service wrote since, in a form no merge reads."""
        try:
            conn = self._connect(readonly=True)
            try:
                if self.table not in self._tables(conn):
                    return 0
                return conn.execute(f'SELECT COUNT(*) FROM {quote_identifier(self.table)}').fetchone()[0]
            finally:
                conn.close()
        except sqlite3.OperationalError as exc:
            if _is_lock_error(exc):
                raise self._locked_error(exc) from None
            return -1
        except sqlite3.DatabaseError:
            return -1

    def _key_columns(self, conn: sqlite3.Connection, schema: str) -> tuple:
        """(columns, primary key columns) of the token table in ``schema`` (main or the attached backup)."""
        rows = conn.execute(f'PRAGMA {schema}.table_info({quote_identifier(self.table)})').fetchall()
        columns = [row[1] for row in rows]
        return columns, [row[1] for row in sorted(rows, key=lambda row: row[5]) if row[5]]

    def _merge(self, wanted: dict, kept: int, backup: bool, backup_dir: str | None, check_mode: bool,
               result: dict) -> dict:
        """Put the backup's rows that the cache lacks now back into it, keeping every row written since."""
        refused = (f'token cache {self.path} holds {kept if kept > 0 else "unreadable"} rows written since the run')
        staging = tempfile.mkdtemp(prefix='vllm_dr_merge_')
        try:
            # the backup set read under the names SQLite looks for (its -wal beside its main file)
            copy = os.path.join(staging, 'backup.db')
            for target, source in wanted.items():
                copy_private(source, copy + target[len(self.path):])
            if kept < 0:
                raise TokenCacheError(f'{refused} in a form no merge reads; replacing the file would lose them: '
                                      'give merge=false to replace it anyway (it is backed up first)')
            conn = self._connect(readonly=check_mode)
            try:
                conn.execute('ATTACH DATABASE ? AS run', (f'file:{urllib.parse.quote(copy)}?mode=ro',))
                result.update(self._merge_rows(conn, refused, check_mode, backup, backup_dir))
            finally:
                conn.close()
        except sqlite3.OperationalError as exc:
            if _is_lock_error(exc):
                raise self._locked_error(exc) from None
            raise TokenCacheError(f'the backup of token cache {self.path} cannot be merged into it ({exc}); '
                                  'give merge=false to replace the cache (it is backed up first)') from None
        except BackupError as exc:
            raise TokenCacheError(str(exc)) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        result['kept_rows'] = kept
        return result

    def _merge_rows(self, conn: sqlite3.Connection, refused: str, check_mode: bool, backup: bool,
                    backup_dir: str | None) -> dict:
        table = quote_identifier(self.table)
        columns, keys = self._key_columns(conn, 'main')
        if self.table not in [row[0] for row in conn.execute("SELECT name FROM run.sqlite_master WHERE type = 'table'")]:
            raise TokenCacheError(f'the backup holds no table {self.table!r}: nothing to merge into {self.path}; '
                                  'check restore_from and table')
        backup_columns, backup_keys = self._key_columns(conn, 'run')
        if not keys or (columns, keys) != (backup_columns, backup_keys):
            why = 'has no primary key' if not keys else 'has other columns or keys than the backup\'s'
            raise TokenCacheError(f'{refused} and its table {self.table!r} {why}, so the backup\'s rows cannot be '
                                  'merged into it; replacing the file would lose them: give merge=false to replace '
                                  'it anyway (it is backed up first)')
        names = ', '.join(quote_identifier(column) for column in columns)
        missing = ' AND '.join(f'present.{quote_identifier(key)} IS removed.{quote_identifier(key)}' for key in keys)
        select_missing = (f'SELECT {", ".join("removed." + quote_identifier(c) for c in columns)} FROM run.{table} AS removed '
                          f'WHERE NOT EXISTS (SELECT 1 FROM main.{table} AS present WHERE {missing})')
        if check_mode:
            return {'restored_rows': conn.execute(f'SELECT COUNT(*) FROM ({select_missing})').fetchone()[0]}
        written = {'backup_files': []}
        if backup:
            written['backup_files'] = self._backup_unchanged(backup_dir)
        self._begin_immediate(conn)
        try:
            cursor = conn.execute(f'INSERT INTO main.{table} ({names}) {select_missing}')
            conn.execute('COMMIT')
        except BaseException:
            conn.execute('ROLLBACK')
            raise
        written['restored_rows'] = cursor.rowcount
        return written


def _byte_write_locked(path: str, offset: int) -> bool:
    """Whether another process holds a write lock on one byte of ``path`` (probed with a shared lock)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, offset)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return True
        raise
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
        return False
    finally:
        os.close(fd)


def _writer_active(path: str) -> bool:
    if not _looks_like_sqlite(path):
        return False  # not a database: no SQLite writer to wait for
    return _byte_write_locked(path, _RESERVED_BYTE) or _byte_write_locked(path + '-shm', _WAL_WRITE_LOCK_BYTE)


def _looks_like_sqlite(path: str) -> bool:
    try:
        with open(path, 'rb') as handle:
            return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _signatures(path: str) -> list:
    signatures = []
    for name in existing_files(path):
        stat = os.stat(name)
        signatures.append((name, stat.st_size, stat.st_mtime_ns))
    return signatures


def _backup_set(restore_from: str, path: str) -> dict:
    """Map each cache file to its file in the backup set named by its main ``.bak`` file."""
    if not restore_from.endswith('.bak') or not os.path.isfile(restore_from):
        raise TokenCacheError(
            f'restore_from {restore_from} is not a backup file; give the main <name>.<timestamp>.bak file '
            'listed in backup_files of an earlier run'
        )
    return {
        target: (restore_from + target[len(path):] if os.path.exists(restore_from + target[len(path):]) else None)
        for target in cache_files(path)
    }


def _ownership(path: str) -> tuple:
    """Owner and mode a restored file should get: the file's own, else its directory's owner and 0600.

    Backups are root-readable 0600 copies; the service must still be able to read what is put back.
    """
    if os.path.exists(path):
        stat = os.stat(path)
        return stat.st_uid, stat.st_gid, stat.st_mode & 0o7777
    stat = os.stat(os.path.dirname(os.path.abspath(path)))
    return stat.st_uid, stat.st_gid, 0o600


def _replace_from(source: str, target: str, owner: tuple) -> None:
    """Atomically replace ``target`` with a copy of ``source``, with the given owner and mode."""
    uid, gid, mode = owner
    staging = f'{target}.restore-{os.getpid()}'
    copy_private(source, staging)
    if os.geteuid() == 0:
        os.chown(staging, uid, gid)
    os.chmod(staging, mode)
    os.replace(staging, target)


def check_backup_dir(directory: str) -> None:
    """Refuse an unfit backup directory before anything is changed (check mode included)."""
    try:
        check_private_dir(directory)
    except BackupError as exc:
        raise TokenCacheError(str(exc)) from None


def _diff_state(files: list, rows, expired_rows) -> dict:
    return {'files': files, 'rows': rows, 'expired_rows': expired_rows}


def manage(cache: TokenCache, state: str, cutoff: float, restored_at: float | None = None, backup: bool = True,
           backup_dir: str | None = None, restore_from: str | None = None, check_mode: bool = False,
           merge: bool = True) -> dict:
    """Bring the cache to ``state``; the result holds what was found, what was done, warnings and a diff."""
    if backup and state != 'inspected':
        check_backup_dir(backup_dir or os.path.dirname(os.path.abspath(cache.path)))
    # a prune (not a check) counts the rows under its write lock, as it judges them for the delete
    found = cache.inspect(cutoff, restored_at, count=state != 'pruned' or check_mode)
    result = dict(found, removed_rows=0, removed_files=[], restored_files=[], backup_files=[], warnings=[], restored_rows=0,
                  kept_rows=0)
    if state == 'pruned':
        result.update(cache.prune(found, cutoff, backup, backup_dir, check_mode))
    before = _diff_state(found['files'], result['rows'], result['expired_rows'])
    after = dict(before)
    if state == 'pruned':
        if result['rows'] is not None:
            after.update(rows=result['rows'] - result['removed_rows'],
                         expired_rows=result['expired_rows'] - result['removed_rows'])
    elif state == 'absent':
        result.update(cache.purge(found, backup, backup_dir, check_mode))
        after = _diff_state([], None, None)
    elif state == 'restored':
        result.update(cache.restore(restore_from, backup, backup_dir, check_mode, merge))
        if result['restored_files']:
            after = _diff_state(result['restored_files'], None, None)
        elif result['restored_rows'] and found['rows'] is not None:
            after.update(rows=found['rows'] + result['restored_rows'])
    result['changed'] = bool(result['removed_rows'] or result['removed_files'] or result['restored_files']
                             or result.get('restored_rows'))
    # what a copy of each backup must hash to (a copy to the controller is checked against it)
    known = result.get('backup_checksums') or {}
    result['backup_checksums'] = {path: known.get(path) or file_digest(path) for path in result['backup_files']}
    result['diff'] = {'before': before, 'after': after}
    return result


def token_cache_argument_spec() -> dict:
    """The options that name the cache and say how to read it (the token_cache doc fragment documents them)."""
    return dict(
        path=dict(type='path', default='/var/lib/vllm/token_cache.db'),
        restored_at=dict(type='str'),
        cutoff=dict(type='str'),
        table=dict(type='str', default='tokens'),
        expires_column=dict(type='str', default='expires_at'),
        lock_timeout=dict(type='float', default=5.0),
    )


def cache_of(params: dict) -> TokenCache:
    return TokenCache(params['path'], params['table'], params['expires_column'], params['lock_timeout'])


def read_times(params: dict) -> tuple:
    """(cutoff, restored_at) as epoch seconds: cutoff defaults to now, restored_at to None; TimestampError on bad input."""
    return (parse_optional(params['cutoff'], 'cutoff', default_now=True),
            parse_optional(params['restored_at'], 'restored_at'))

"""Token cache files shaped like vLLM's token_cache.db, for tests and benchmarks."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

SCHEMA = ('CREATE TABLE IF NOT EXISTS tokens ('
          'session_id TEXT PRIMARY KEY, access_token TEXT, refresh_token TEXT, expires_at)')


def make_cache(path, rows=(), wal=False, schema=SCHEMA, keep_open=False):
    """Write ``rows`` of (session_id, expires_at) with fake tokens; returns the open connection if asked."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    if wal:
        conn.execute('PRAGMA journal_mode=WAL')
        conn.execute('PRAGMA wal_autocheckpoint=0')  # keep rows in the -wal file, as a live service does
    conn.execute(schema)
    conn.execute('BEGIN')
    conn.executemany(
        'INSERT INTO tokens VALUES (?, ?, ?, ?)',
        ((sid, f'at-{sid}-SECRET', f'rt-{sid}-SECRET', exp) for sid, exp in rows))
    conn.execute('COMMIT')
    if keep_open:
        return conn
    conn.close()
    return None


def expiring(count, start=0, offset=-3600, prefix='0x'):
    """``count`` rows expiring ``offset`` seconds from now (negative: already expired)."""
    base = time.time() + offset
    return [(f'{prefix}{i:06x}', base) for i in range(start, start + count)]


def row_ids(path):
    conn = sqlite3.connect(str(path))
    try:
        return sorted(row[0] for row in conn.execute('SELECT session_id FROM tokens'))
    finally:
        conn.close()


def cache_rows(path) -> dict:
    """The token cache's rows by session id, read without writing (a rollback that merges is judged by its rows)."""
    conn = sqlite3.connect(f'file:{path}?mode=ro', uri=True)
    try:
        return {row[0]: row[1:] for row in conn.execute('SELECT * FROM tokens')}
    finally:
        conn.close()


def set_mtime(path, epoch):
    os.utime(str(path), (epoch, epoch))


def crash_after_write(path, rows):
    """Write rows in WAL mode from a process that dies without closing, as a snapshot of a live service.

    The -wal and -shm files stay on disk holding the newest rows, exactly what a restore brings back.
    """
    script = (
        'import os, sqlite3, sys, json\n'
        'conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n'
        'conn.execute("PRAGMA journal_mode=WAL")\n'
        'conn.execute("PRAGMA wal_autocheckpoint=0")\n'
        f'conn.execute("{SCHEMA}")\n'
        'rows = json.loads(sys.argv[2])\n'
        'conn.executemany("INSERT INTO tokens VALUES (?, ?, ?, ?)",'
        ' [(s, "at-SECRET", "rt-SECRET", e) for s, e in rows])\n'
        'os._exit(0)\n'
    )
    subprocess.run([sys.executable, '-c', script, str(path), json.dumps(list(rows))], check=True)


class WriteLockHolder:
    """Another process in the middle of a write transaction on a cache (a busy service).

    SQLite's locks are POSIX locks, which do not conflict within one process: a real
    service is another process, so the holder is too.
    """

    def __init__(self, path):
        self.path = str(path)
        self.process = None

    def __enter__(self):
        script = (
            'import sqlite3, sys\n'
            'conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n'
            'conn.execute("BEGIN IMMEDIATE")\n'
            'conn.execute("INSERT INTO tokens VALUES (\'in-flight\', \'a\', \'r\', 0)")\n'
            'print("locked", flush=True)\n'
            'sys.stdin.read()\n'
            'conn.execute("ROLLBACK")\n'
        )
        self.process = subprocess.Popen(  # pylint: disable=consider-using-with
            [sys.executable, '-c', script, self.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != 'locked':
            raise RuntimeError('the lock holder did not start')
        return self

    def release(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=10)
        self.process.stdout.close()

    def __exit__(self, *exc_info):
        self.release()

"""Benchmark: vllm_token_cache inspect and prune on a large cache (make bench-cache).

Builds a cache of --rows rows (half expired, mixed epoch/ISO expiries, 1% unreadable),
then runs each operation in a fresh child process and reports wall time and the
child's peak RSS. For reference, the same DELETE through the sqlite3 CLI (no
backup, no VACUUM) is timed on an identical copy. Exits 1 when a peak RSS is
above --max-rss-mb: prune must not load rows into Python memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')

CHILD = r'''
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from ansible_collections.inferops.vllm_dr.plugins.module_utils._token_cache import TokenCache, manage
start = time.perf_counter()
result = manage(TokenCache(sys.argv[2]), sys.argv[3], cutoff=float(sys.argv[4]), backup_dir=sys.argv[5])
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "rows": result["rows"], "expired_rows": result["expired_rows"],
                  "removed_rows": result["removed_rows"], "backup_files": len(result["backup_files"]),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def build_cache(path: str, rows: int, now: float) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute('CREATE TABLE tokens (session_id TEXT PRIMARY KEY, access_token TEXT, refresh_token TEXT, expires_at)')
    conn.execute('BEGIN')

    def generate():
        for i in range(rows):
            if i % 100 == 99:
                expiry = 'unreadable'
            elif i % 2:
                expiry = now - 86400 - i if i % 4 == 1 else time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now - 3600))
            else:
                expiry = now + 86400 + i
            yield (f'0x{i:08x}', 'a' * 64, 'r' * 64, expiry)

    conn.executemany('INSERT INTO tokens VALUES (?, ?, ?, ?)', generate())
    conn.execute('COMMIT')
    conn.close()


def run_child(cache: str, state: str, cutoff: float, backup_dir: str) -> dict:
    out = subprocess.run([sys.executable, '-c', CHILD, COLLECTIONS, cache, state, str(cutoff), backup_dir],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def sqlite_cli_delete(cache: str, cutoff: float) -> float:
    expr = ("CASE WHEN typeof(expires_at) IN ('integer','real') THEN expires_at "
            "ELSE (julianday(expires_at) - 2440587.5) * 86400.0 END")
    start = time.perf_counter()
    subprocess.run(['sqlite3', cache, f'DELETE FROM tokens WHERE {expr} < {cutoff};'], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rows', type=int, default=1_000_000)
    parser.add_argument('--max-rss-mb', type=float, default=100.0)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix='vllm-dr-bench-cache-')
    try:
        cache = os.path.join(work, 'token_cache.db')
        now = time.time()
        start = time.perf_counter()
        build_cache(cache, args.rows, now)
        print(f'built {args.rows:,} rows ({os.path.getsize(cache) / 2**20:.0f} MiB) in {time.perf_counter() - start:.1f}s')
        reference = os.path.join(work, 'reference.db')
        shutil.copyfile(cache, reference)

        inspect = run_child(cache, 'inspected', now, work)
        prune = run_child(cache, 'pruned', now, os.path.join(work, 'backups'))
        cli = sqlite_cli_delete(reference, now)
        size_after = os.path.getsize(cache) / 2**20

        print(f'inspect: {inspect["seconds"]:.2f}s, peak RSS {inspect["peak_rss_mb"]:.1f} MB '
              f'({inspect["rows"]:,} rows, {inspect["expired_rows"]:,} expired)')
        print(f'prune:   {prune["seconds"]:.2f}s, peak RSS {prune["peak_rss_mb"]:.1f} MB '
              f'({prune["removed_rows"]:,} rows removed, backup + DELETE + VACUUM, {size_after:.0f} MiB after)')
        print(f'reference, sqlite3 CLI DELETE only (no backup, no VACUUM): {cli:.2f}s')
        worst = max(inspect['peak_rss_mb'], prune['peak_rss_mb'])
        if worst > args.max_rss_mb:
            print(f'FAIL: peak RSS {worst:.1f} MB is above {args.max_rss_mb:.0f} MB')
            return 1
        print(f'ok: peak RSS {worst:.1f} MB <= {args.max_rss_mb:.0f} MB')
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())

"""Benchmark: vllm_token_cache prune against a bare sqlite3 DELETE + VACUUM (make bench-cache).

Builds a cache of --rows rows (half expired, mixed epoch/ISO expiries, 1% unreadable)
once. Each measured run starts from the same state: a fresh copy of that file, flushed
to disk before the clock starts, nothing left of the previous run. The contenders,
interleaved (baseline, prune, baseline, prune, ..., baseline) and each prune compared
with the mean of the two baselines around it:

  baseline  sqlite3 <copy> "DELETE FROM tokens WHERE <expiry> < <cutoff>; VACUUM;"
            (the same rows, no backup, no check, one process)
  prune     the module's prune in a process of its own (state=pruned: integrity check,
            counts, the 0600 backup under the write lock, DELETE, VACUUM), start included

Rounds are added until the last --rounds ratios lie within ±--tolerance of their median
(at most --max-rounds); otherwise the machine is too noisy and the benchmark fails.
Inspect and purge of the full cache are timed once (they read or copy the whole file).
Exits 1 when the median ratio is above --target, a peak RSS above --max-rss-mb (prune
must not load rows into Python memory), the counts differ, or the rounds never settle.
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
sys.path.insert(0, os.path.join(ROOT, 'tests'))
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')

from bench.rounds import Rounds, machine_load  # noqa: E402  pylint: disable=wrong-import-position

CHILD = r'''
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from ansible_collections.inferops.vllm_dr.plugins.module_utils._token_cache import TokenCache, manage
start = time.perf_counter()
result = manage(TokenCache(sys.argv[2]), sys.argv[3], cutoff=float(sys.argv[4]), backup_dir=sys.argv[5])
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "rows": result["rows"], "expired_rows": result["expired_rows"],
                  "removed_rows": result["removed_rows"], "removed_files": len(result["removed_files"]),
                  "backup_files": len(result["backup_files"]),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''

# The expiry as someone would write it by hand for this cache: epoch seconds or ISO text.
BARE_EXPIRY = ("CASE WHEN typeof(expires_at) IN ('integer','real') THEN expires_at "
               "ELSE (julianday(expires_at) - 2440587.5) * 86400.0 END")


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


def fresh_copy(master: str, work: str, name: str) -> str:
    """A copy of the cache in a directory of its own, on disk before the clock starts (no write-back left to race)."""
    directory = os.path.join(work, name)
    shutil.rmtree(directory, ignore_errors=True)
    os.mkdir(directory, 0o700)
    path = os.path.join(directory, 'token_cache.db')
    shutil.copyfile(master, path)
    with open(path, 'rb') as handle:
        os.fsync(handle.fileno())
    return path


def run_child(cache: str, state: str, cutoff: float, backup_dir: str) -> dict:
    """The module's work in a process of its own: wall time from its start, and its own account."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, '-c', CHILD, COLLECTIONS, cache, state, repr(cutoff), backup_dir],
                         check=True, capture_output=True, text=True)
    result = json.loads(out.stdout)
    result['wall_s'] = time.perf_counter() - start
    return result


def bare_delete_vacuum(cache: str, cutoff: float) -> dict:
    start = time.perf_counter()
    out = subprocess.run(['sqlite3', cache, f'DELETE FROM tokens WHERE {BARE_EXPIRY} < {cutoff!r}; SELECT changes(); VACUUM;'],
                         check=True, capture_output=True, text=True)
    return {'wall_s': time.perf_counter() - start, 'removed_rows': int(out.stdout.split()[-1])}


def rows_left(cache: str) -> int:
    conn = sqlite3.connect(cache)
    try:
        return conn.execute('SELECT count(*) FROM tokens').fetchone()[0]
    finally:
        conn.close()


def timed_baseline(master: str, work: str, cutoff: float) -> dict:
    cache = fresh_copy(master, work, 'baseline')
    result = bare_delete_vacuum(cache, cutoff)
    result['left'] = rows_left(cache)
    print(f'baseline  sqlite3 DELETE + VACUUM: {result["wall_s"]:.2f}s ({result["removed_rows"]:,} rows removed, '
          f'{result["left"]:,} left)', flush=True)
    shutil.rmtree(os.path.dirname(cache))
    return result


def timed_prune(master: str, work: str, cutoff: float) -> dict:
    cache = fresh_copy(master, work, 'prune')
    result = run_child(cache, 'pruned', cutoff, os.path.join(os.path.dirname(cache), 'backups'))
    result['left'] = rows_left(cache)
    print(f'prune     vllm_token_cache state=pruned: {result["wall_s"]:.2f}s (manage() {result["seconds"]:.2f}s), '
          f'peak RSS {result["peak_rss_mb"]:.0f} MB ({result["removed_rows"]:,} rows removed, {result["left"]:,} left, '
          f'{result["backup_files"]} backup file, {os.path.getsize(cache) / 2**20:.0f} MiB after)', flush=True)
    shutil.rmtree(os.path.dirname(cache))
    return result


def timed_whole_file(master: str, work: str, cutoff: float, size_mib: float) -> list:
    """Inspect and purge, which read or copy the whole file: their time and pace in MiB/s."""
    cache = fresh_copy(master, work, 'whole')
    lines, peaks = [], []
    for state in ('inspected', 'absent'):
        result = run_child(cache, state, cutoff, os.path.join(os.path.dirname(cache), 'backups'))
        peaks.append(result['peak_rss_mb'])
        lines.append(f'{state:9} {result["wall_s"]:.2f}s, {size_mib / result["wall_s"]:.0f} MiB/s of the '
                     f'{size_mib:.0f} MiB file, peak RSS {result["peak_rss_mb"]:.0f} MB '
                     f'({result["rows"]:,} rows, {result["expired_rows"]:,} expired, {result["removed_files"]} files removed)')
    shutil.rmtree(os.path.dirname(cache))
    return lines, max(peaks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rows', type=int, default=1_000_000)
    parser.add_argument('--max-rss-mb', type=float, default=100.0)
    parser.add_argument('--target', type=float, default=1.5, help='the highest median prune / baseline ratio accepted')
    parser.add_argument('--rounds', type=int, default=3, help='the rounds judged: the last ones, once they agree')
    parser.add_argument('--max-rounds', type=int, default=8, help='give up on a noisy machine after this many')
    parser.add_argument('--tolerance', type=float, default=0.10, help='how far a judged ratio may lie from their median')
    args = parser.parse_args()

    print(machine_load('start'), flush=True)
    work = tempfile.mkdtemp(prefix='vllm-dr-bench-cache-')
    failures = []
    try:
        master = os.path.join(work, 'token_cache.db')
        cutoff = time.time()
        start = time.perf_counter()
        build_cache(master, args.rows, cutoff)
        size_mib = os.path.getsize(master) / 2**20
        print(f'built {args.rows:,} rows ({size_mib:.0f} MiB) in {time.perf_counter() - start:.1f}s', flush=True)

        lines, peak = timed_whole_file(master, work, cutoff, size_mib)
        print('\n'.join(lines), flush=True)
        rounds = Rounds(args.rounds, args.max_rounds, args.tolerance)
        before = timed_baseline(master, work, cutoff)
        while rounds.more():
            print(f'round {rounds.done + 1}', flush=True)
            prune = timed_prune(master, work, cutoff)
            after = timed_baseline(master, work, cutoff)
            reference = (before['wall_s'] + after['wall_s']) / 2
            rounds.add({'baseline_s': before['wall_s'], 'prune_s': prune['wall_s']}, {'prune': prune['wall_s'] / reference})
            print(f'prune     {prune["wall_s"] / reference:.2f}x the baseline around it '
                  f'(the mean of {before["wall_s"]:.2f}s and {after["wall_s"]:.2f}s)', flush=True)
            if (prune['removed_rows'], prune['left']) != (before['removed_rows'], before['left']):
                failures.append(f'prune removed {prune["removed_rows"]:,} and left {prune["left"]:,}, the baseline '
                                f'{before["removed_rows"]:,} and {before["left"]:,}: not the same rows')
            peak = max(peak, prune['peak_rss_mb'])
            before = after
        print('\n'.join(rounds.report()))
        if not rounds.settled():
            failures.append('the rounds did not settle: the machine is too noisy to judge the ratio')
        ratio = rounds.median('prune')
        print(f'ratio     prune (with its backup) {ratio:.2f}x a bare sqlite3 DELETE + VACUUM of the same rows '
              f'(median of the last {args.rounds}; target <= {args.target}x)')
        if ratio > args.target:
            failures.append(f'prune is {ratio:.2f}x the bare sqlite3 DELETE + VACUUM > {args.target}x')
        if peak > args.max_rss_mb:
            failures.append(f'peak RSS {peak:.1f} MB is above {args.max_rss_mb:.0f} MB')
    finally:
        shutil.rmtree(work, ignore_errors=True)
        print(machine_load('end'))
    for failure in failures:
        print(f'FAIL: {failure}')
    if not failures:
        print('ok: every target met')
    return 1 if failures else 0


if __name__ == '__main__':
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())

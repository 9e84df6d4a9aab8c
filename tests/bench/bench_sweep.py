"""Benchmark: vllm_session_sweep against the redis-cli one-liner (make bench-sweep), on Redis and on Valkey.

One run, same machine, same data: --sessions sessions (half expired, 1% malformed)
are written once per server (--servers: Redis 7.0 and Valkey 8.1 by default) and saved
to one RDB file. Every measured run starts from the same state: a fresh server of that
kind loaded from a copy of that file, settled before the clock starts (loading done,
every key there, MEMORY PURGE, no lazy free pending). The baseline uses that server's
own cli (redis-cli, valkey-cli). The runs are interleaved (baseline, direct, baseline,
ansible, baseline, direct, ...) and each sweep is compared with the mean of the two
baselines around it, so that a change of the machine's pace moves both sides of its
ratio. Rounds are added until the last --rounds ratios of each sweep lie within
±--tolerance of their median (at most --max-rounds); otherwise the machine is too
noisy to judge and the benchmark fails. The targets are judged on those medians: direct
at most --direct-target (0.6), ansible at most --ansible-target (0.8), and the Cluster
sweep at most --cluster-target (0.8) times the standalone baseline's median.
Contenders:

  baseline  redis-cli --scan --pattern 'vllm:session:*' | xargs -n 1000 redis-cli unlink
            (unconditional: deletes every session, keeps no backup)
  direct    the module's sweep (select=expired, with backup) called from Python
  ansible   ansible localhost -m inferops.vllm_dr.vllm_session_sweep (the same sweep)
  cluster   the direct sweep on a 3-primary Redis Cluster holding the same sessions
  restore   the direct sweep's backup restored into the emptied store (peak RSS at most --max-rss-mb)
  etcd      --etcd-keys expired sessions in etcd swept into a backup, then restored

Why the baseline alone used to move 2x: the server's share of it is small (its CPU time
is printed beside each baseline); most of it is redis-cli's SCAN round trips (COUNT 10)
and the thousand redis-cli processes xargs starts, whose pace follows whatever else the
machine is doing. Hence the interleaving, the settled start and the spread.

Wall time, peak RSS of the sweeping process (and its children) and the counts are
printed with the ratios to the baseline, per server, and the ratios of both servers
side by side at the end, with the machine load at the start and at the end. Exits 1
when a target is missed on either server or the rounds do not settle.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')
BIN = os.path.dirname(sys.executable)

from harness.servers import (  # noqa: E402  pylint: disable=wrong-import-position
    STORE_SERVERS, EtcdServer, RedisClusterSet, RedisServer, store_binary,
)
from bench.rounds import Rounds, machine_load  # noqa: E402  pylint: disable=wrong-import-position

PATTERN = 'vllm:session:*'

# The module's work in a process of its own: sys.argv = collections, store params (JSON), action, backup path, batch size.
DIRECT = r'''
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import session_store_argument_spec
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.stores import open_store
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep import SweepOptions, Sweeper, report, restore
params = {name: spec.get('default') for name, spec in session_store_argument_spec().items()}
params.update(json.loads(sys.argv[2]))
started = time.monotonic()
store = open_store(params)
if sys.argv[3] == 'restored':
    result = restore(store, sys.argv[4], False)
else:
    options = SweepOptions(state='swept', backup_path=sys.argv[4], batch_size=int(sys.argv[5]))
    result = report(Sweeper(store, options).sweep(), options, started)
store.close()
result['wall_s'] = time.monotonic() - started
result['peak_rss_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(result))
'''


def seed(client, sessions: int, now: float) -> dict:
    counts = {'expired': 0, 'valid': 0, 'malformed': 0}
    pipe = client.pipeline(transaction=False)
    for i in range(sessions):
        sid = f'0x{i:08x}'
        if i % 100 == 99:
            expires, kind = 'unreadable', 'malformed'
        elif i % 2:
            expires, kind = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now - 3600 - i % 86400)), 'expired'
        else:
            expires, kind = str(int(now + 86400 + i % 86400)), 'valid'
        counts[kind] += 1
        fields = {'access_token': f'at-{i:040d}', 'refresh_token': f'rt-{i:040d}', 'expires_at': expires}
        pipe.hset(f'vllm:session:{sid}', mapping=fields)
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    return counts


@contextlib.contextmanager
def fresh_server(work: str, rdb: str, name: str, kind: str, keys: int):
    """A settled server of ``kind`` loaded from a copy of the RDB, in a directory of its own removed afterwards."""
    directory = tempfile.mkdtemp(prefix=f'{kind}-{name}-', dir=work)
    try:
        shutil.copyfile(rdb, os.path.join(directory, 'dump.rdb'))
        with RedisServer(workdir=directory, kind=kind) as server:
            settle(server, keys)
            yield server
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def settle(server: RedisServer, keys: int, timeout: float = 600) -> None:
    """Wait until the server has loaded all ``keys``, has given its allocator's free pages back and frees nothing
    lazily: the same state before every measured run."""
    client = redis.Redis(host='127.0.0.1', port=server.port, socket_timeout=60)
    deadline = time.monotonic() + timeout
    while True:
        try:
            info = client.info()
            if not info['loading'] and client.dbsize() == keys:
                client.memory_purge()
                if not client.info('memory').get('lazyfree_pending_objects', 0):
                    break
        except redis.BusyLoadingError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f'{server.kind} on port {server.port} did not settle with {keys:,} keys in {timeout:.0f}s')
        time.sleep(0.05)
    client.close()


def server_cpu(server: RedisServer) -> float:
    info = server.client().info('cpu')
    return info['used_cpu_user'] + info['used_cpu_sys']


def run_baseline(server: RedisServer) -> dict:
    cli = store_binary(server.kind, 'cli')
    command = (f"{cli} -p {server.port} --scan --pattern '{PATTERN}' | "
               f"xargs -n 1000 {cli} -p {server.port} unlink > /dev/null")
    client = server.client()
    before = client.dbsize()
    cpu = server_cpu(server)
    start = time.monotonic()
    subprocess.run(['bash', '-c', command], check=True)
    wall_s = time.monotonic() - start
    if client.dbsize():
        raise SystemExit(f'baseline left {client.dbsize():,} keys: {os.path.basename(cli)} did not finish its job')
    return {'wall_s': wall_s, 'deleted': before, 'server_cpu_s': server_cpu(server) - cpu}


def run_direct(port: int, backend: str, backup: str, batch: int, state: str = 'swept', params=None) -> dict:
    """The module's sweep (or restore) of the store, called from Python in a process of its own."""
    params = params or {'backend': backend, 'login_host': '127.0.0.1', 'login_port': port}
    out = subprocess.run([sys.executable, '-c', DIRECT, COLLECTIONS, json.dumps(params), state, backup, str(batch)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def run_restore(server: RedisServer, backup: str, deleted: int, args, failures: list) -> None:
    """Empty the store, restore the sweep's backup into it: time, peak RSS, counts."""
    client = server.client()
    client.flushall()
    result = run_direct(server.port, 'redis', backup, args.batch_size, state='restored')
    rss = result['peak_rss_mb']
    print(f'restore   vllm_session_sweep state=restored of that backup into the emptied store: {result["wall_s"]:.2f}s, '
          f'peak RSS {rss:.0f} MB; restored {result["restored"]:,} of {result["in_backup"]:,}, '
          f'store now {client.dbsize():,}')
    if result['restored'] != deleted or client.dbsize() != deleted:
        failures.append('restore: wrong counts')
    if rss > args.max_rss_mb:
        failures.append(f'restore: peak RSS {rss:.0f} MB > {args.max_rss_mb:.0f} MB')


def etcd_put_all(url: str, values: dict) -> None:
    """Write every key in transactions of 128 puts (etcd's default --max-txn-ops)."""
    items = list(values.items())
    for start in range(0, len(items), 128):
        puts = [{'request_put': {'key': base64.b64encode(key.encode()).decode(),
                                 'value': base64.b64encode(value.encode()).decode()}}
                for key, value in items[start:start + 128]]
        request = urllib.request.Request(f'{url}/v3/kv/txn', data=json.dumps({'success': puts}).encode())
        with urllib.request.urlopen(request, timeout=30):  # nosec: loopback only
            pass


def run_etcd_restore(work: str, keys: int, args, failures: list) -> None:
    """Sweep ``keys`` expired etcd sessions into a backup, then restore them: the restore's time and peak RSS."""
    now = time.time()
    with EtcdServer(workdir=os.path.join(work, 'etcd')) as server:
        etcd_put_all(server.url, {f'vllm/session/e{i:06d}': json.dumps(
            {'access_token': f'at-{i:040d}', 'refresh_token': f'rt-{i:040d}', 'expires_at': int(now - 3600)})
            for i in range(keys)})
        params = {'backend': 'etcd', 'etcd_endpoints': [server.url]}
        backup = os.path.join(work, 'etcd.jsonl')
        swept = run_direct(0, 'etcd', backup, args.batch_size, params=params)
        result = run_direct(0, 'etcd', backup, args.batch_size, state='restored', params=params)
    print(f'etcd      swept {swept["deleted"]:,} keys in {swept["wall_s"]:.2f}s; restored {result["restored"]:,} in '
          f'{result["wall_s"]:.2f}s, peak RSS {result["peak_rss_mb"]:.0f} MB')
    if swept['deleted'] != keys or result['restored'] != keys:
        failures.append('etcd restore: wrong counts')


# Runs a command and reports the peak RSS of it and its descendants (the module's process
# under ansible), without the redis-servers this benchmark itself started.
MEASURE = r'''
import json, resource, subprocess, sys, time
start = time.monotonic()
out = subprocess.run(sys.argv[1:], check=True, capture_output=True, text=True)
print(json.dumps({"stdout": out.stdout, "wall_s": time.monotonic() - start,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
'''


def run_ansible(port: int, backup: str, batch: int) -> dict:
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR='1', ANSIBLE_STDOUT_CALLBACK='minimal',
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0')
    command = [os.path.join(BIN, 'ansible'), 'localhost', '-m', 'inferops.vllm_dr.vllm_session_sweep',
               '-a', f'login_host=127.0.0.1 login_port={port} state=swept backup_path={backup} batch_size={batch}']
    out = subprocess.run([sys.executable, '-c', MEASURE] + command, check=True, capture_output=True, text=True, env=env)
    measured = json.loads(out.stdout)
    result = json.loads(measured['stdout'].split('=>', 1)[1])
    result.update(wall_s=measured['wall_s'], peak_rss_mb=measured['peak_rss_mb'])
    return result


def timed_baseline(work: str, rdb: str, kind: str, keys: int) -> float:
    with fresh_server(work, rdb, 'baseline', kind, keys) as server:
        baseline = run_baseline(server)
    print(f'baseline  {kind}-cli scan | xargs unlink: {baseline["wall_s"]:.2f}s, the server\'s CPU '
          f'{baseline["server_cpu_s"]:.2f}s (deleted all {baseline["deleted"]:,}, no condition, no backup)', flush=True)
    return baseline['wall_s']


def timed_sweep(name: str, work: str, rdb: str, counts: dict, args, failures: list, kind: str,
                restore: bool = False) -> float:
    """One sweep (direct or through Ansible) on a fresh ``kind`` server from the RDB: its wall time, checked;
    with ``restore``, its backup is then restored into the emptied server (not timed with the sweep)."""
    backup = os.path.join(work, f'{name}.jsonl')
    with fresh_server(work, rdb, name, kind, args.sessions) as server:
        cpu = server_cpu(server)
        result = run_direct(server.port, 'redis', backup, args.batch_size) if name == 'direct' \
            else run_ansible(server.port, backup, args.batch_size)
        cpu = server_cpu(server) - cpu
        left = server.client().dbsize()
        if restore:
            run_restore(server, backup, result['deleted'], args, failures)
    rss = result['peak_rss_mb']
    inside = f' (the module itself {result["duration_s"]:.2f}s)' if name == 'ansible' else ''
    print(f'{name:8}  vllm_session_sweep: {result["wall_s"]:.2f}s{inside}, the server\'s CPU {cpu:.2f}s, peak RSS {rss:.0f} MB; '
          f'scanned {result["scanned"]:,}, deleted {result["deleted"]:,}, malformed {result["malformed"]:,}, '
          f'left {left:,}, backup {os.path.getsize(backup) / 2**20:.0f} MiB', flush=True)
    os.remove(backup)
    if result['deleted'] != counts['expired'] or left != args.sessions - counts['expired']:
        failures.append(f'{kind} {name}: wrong counts')
    if rss > args.max_rss_mb:
        failures.append(f'{kind} {name}: peak RSS {rss:.0f} MB > {args.max_rss_mb:.0f} MB')
    return result['wall_s']


def run_rounds(work: str, rdb: str, counts: dict, args, failures: list, kind: str) -> Rounds:
    """baseline, direct, baseline, ansible, baseline, ... until the ratios settle (or may not be waited for longer)."""
    rounds = Rounds(args.rounds, args.max_rounds, args.tolerance)
    before = timed_baseline(work, rdb, kind, args.sessions)
    while rounds.more():
        print(f'round {rounds.done + 1} (at most {rounds.max_rounds})', flush=True)
        figures, ratios = {'baseline_s': before}, {}
        for name in ('direct', 'ansible'):
            # the restore once per server kind, after the first direct sweep
            restore = args.restore and name == 'direct' and not rounds.done
            wall_s = timed_sweep(name, work, rdb, counts, args, failures, kind, restore)
            after = timed_baseline(work, rdb, kind, args.sessions)
            ratios[name] = wall_s / statistics.mean([before, after])
            figures[f'{name}_s'] = wall_s
            print(f'{name:8}  {ratios[name]:.2f}x the baseline around it (the mean of {before:.2f}s and {after:.2f}s)',
                  flush=True)
            before = after
        rounds.add(figures, ratios)
    return rounds


def run_server(work: str, kind: str, args, failures: list) -> dict:
    """Seed a ``kind`` server, time the rounds (and the cluster) on it; the median ratio of each sweep."""
    now = time.time()
    with RedisServer(workdir=os.path.join(work, f'{kind}-seed'), kind=kind) as seeder:
        start = time.monotonic()
        counts = seed(seeder.client(), args.sessions, now)
        # a slow SAVE of a million keys on a busy machine outlasts the harness client's timeout
        redis.Redis(host='127.0.0.1', port=seeder.port, socket_timeout=600).save()
        rdb = os.path.join(work, f'{kind}-sessions.rdb')
        shutil.copyfile(seeder.rdb_path, rdb)
    print(f'seeded {kind} with {args.sessions:,} sessions ({counts["expired"]:,} expired, {counts["malformed"]:,} malformed) '
          f'in {time.monotonic() - start:.1f}s; RDB {os.path.getsize(rdb) / 2**20:.0f} MiB', flush=True)

    rounds = run_rounds(work, rdb, counts, args, failures, kind)
    for line in rounds.report():
        print(f'{kind:7}   {line}')
    if not rounds.settled():
        failures.append(f'{kind}: the rounds did not settle, the machine is too noisy to judge the ratios')
    targets = {'direct': args.direct_target, 'ansible': args.ansible_target}
    medians = {}
    for name in targets:
        ratio = medians[name] = rounds.median(name)
        print(f'{name:8}  median of the last {args.rounds} rounds: {ratio:.2f}x baseline '
              f'({", ".join(f"{value:.2f}" for value in rounds.judged(name))})')
        if ratio > targets[name]:
            failures.append(f'{kind} {name}: {ratio:.2f}x baseline > {targets[name]}x')
    baseline_s = statistics.median(rounds.figures['baseline_s'][-args.rounds:])

    if not args.skip_cluster:
        with RedisClusterSet(3, workdir=os.path.join(work, f'{kind}-cluster'), kind=kind) as cluster:
            start = time.monotonic()
            seed(cluster.client(), args.sessions, now)
            print(f'cluster seeded in {time.monotonic() - start:.1f}s')
            result = run_direct(cluster.nodes[0].port, 'redis_cluster', os.path.join(work, f'{kind}-cluster.jsonl'),
                                args.batch_size)
        print(f'cluster   vllm_session_sweep on 3 {kind} primaries: {result["wall_s"]:.2f}s '
              f'({result["wall_s"] / baseline_s:.2f}x the standalone baseline\'s median {baseline_s:.2f}s), '
              f'peak RSS {result["peak_rss_mb"]:.0f} MB, deleted {result["deleted"]:,}')
        if result['deleted'] != counts['expired']:
            failures.append(f'{kind} cluster: wrong counts')
        if result['wall_s'] / baseline_s > args.cluster_target:
            failures.append(f'{kind} cluster: {result["wall_s"] / baseline_s:.2f}x the standalone baseline > '
                            f'{args.cluster_target}x')
    return medians


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sessions', type=int, default=1_000_000)
    parser.add_argument('--batch-size', type=int, default=1000)
    parser.add_argument('--max-rss-mb', type=float, default=100.0)
    parser.add_argument('--direct-target', type=float, default=0.6, help='the highest median direct / baseline ratio')
    parser.add_argument('--ansible-target', type=float, default=0.8, help='the highest median ansible / baseline ratio')
    parser.add_argument('--cluster-target', type=float, default=0.8,
                        help="the highest 3-primary Cluster sweep / the standalone baseline's median ratio")
    parser.add_argument('--skip-cluster', action='store_true')
    parser.add_argument('--no-restore', dest='restore', action='store_false',
                        help='skip the restore of the direct sweep\'s backup into the emptied store')
    parser.add_argument('--etcd-keys', type=int, default=20_000, help='etcd sessions swept and restored (0: skip)')
    parser.add_argument('--only-etcd', action='store_true', help='only the etcd sweep and restore')
    parser.add_argument('--servers', default=','.join(STORE_SERVERS),
                        help=f'the servers to sweep, comma-separated (default {",".join(STORE_SERVERS)})')
    parser.add_argument('--rounds', type=int, default=3,
                        help='the rounds judged: the last ones, once their ratios agree; targets judged on their medians')
    parser.add_argument('--max-rounds', type=int, default=6, help='give up on a noisy machine after this many rounds')
    parser.add_argument('--tolerance', type=float, default=0.10,
                        help='how far each judged ratio may lie from their median')
    args = parser.parse_args()

    print(machine_load('start'), flush=True)
    work = tempfile.mkdtemp(prefix='vllm-dr-bench-sweep-')
    failures = []
    try:
        if args.etcd_keys:
            run_etcd_restore(work, args.etcd_keys, args, failures)
        if args.only_etcd:
            return report_failures(failures)
        summary = {}
        for kind in [name.strip() for name in args.servers.split(',') if name.strip()]:
            if kind not in STORE_SERVERS:
                raise SystemExit(f'--servers: unknown server {kind!r}; give some of {", ".join(STORE_SERVERS)}')
            print(f'== {kind}')
            summary[kind] = run_server(work, kind, args, failures)
        for kind, ratios in summary.items():
            print(f'ratio     {kind:7} direct {ratios["direct"]:.2f}x, ansible {ratios["ansible"]:.2f}x the {kind}-cli baseline')
    finally:
        shutil.rmtree(work, ignore_errors=True)
        print(machine_load('end'))
    return report_failures(failures)


def report_failures(failures: list) -> int:
    for failure in failures:
        print(f'FAIL: {failure}')
    if not failures:
        print('ok: every target met')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())

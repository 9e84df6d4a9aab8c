"""A pod that goes away while the purge loop runs is named as gone; other failures keep their own message."""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import purge_failures

OPTIONS = {'deployment': 'vllm', 'namespace': 'ns', 'backup_dir': '/backups/run-1'}


def pod(name, phase='Running', deleting=False):
    meta = {'name': name}
    if deleting:
        meta['deletionTimestamp'] = '2026-12-03T12:00:00Z'
    return {'metadata': meta, 'status': {'phase': phase}}


def purged(name):
    return {'item': f'ns/{name}', 'changed': True, 'backup_files': [f'/data/{name}.db']}


def failed(name, msg='MODULE FAILURE\nSee stdout/stderr for the exact error'):
    return {'item': f'ns/{name}', 'failed': True, 'msg': msg}


def test_every_pod_purged_is_no_failure():
    assert purge_failures([purged('a'), purged('b')], [pod('a'), pod('b')], **OPTIONS) == []


def no_result(name):
    """What the loop keeps when kubectl exec finds no pod: no module result, its failure waived for the judgement."""
    return {'item': f'ns/{name}', 'failed': False, 'failed_when_result': False, 'rc': 1,
            'module_stderr': f'Error from server (NotFound): pods "{name}" not found\n',
            'msg': 'Module result deserialization failed: No start of json char found'}


def test_a_pod_deleted_during_the_loop_is_named_gone_and_the_rerun_is_asked_for():
    lines = purge_failures([purged('a'), no_result('b')], [pod('a'), pod('c', phase='Pending')], **OPTIONS)
    assert lines == [
        'pod b of Deployment vllm in namespace ns went away during the purge (deleted or replaced), so its cache '
        'was not purged',
        'the cache was purged in 1 other pod (backups in /backups/run-1); sessions, the configuration and the '
        'Deployment were left as they were: re-run to purge the pods running now']


def test_a_pod_being_deleted_or_unreachable_counts_as_gone():
    results = [failed('a'), {'item': 'ns/b', 'unreachable': True, 'msg': 'gone'}]
    lines = purge_failures(results, [pod('a', deleting=True)], **OPTIONS)
    assert [line.split(' went away')[0] for line in lines[:2]] == ['pod a of Deployment vllm in namespace ns'] * 1 + \
        ['pod b of Deployment vllm in namespace ns']
    assert lines[2].startswith('the cache was purged in 0 other pods')


def test_a_failure_in_a_pod_still_running_keeps_the_modules_first_line():
    lines = purge_failures([failed('a', msg='not an SQLite database: /data/token_cache.db\nmore'), purged('b')],
                           [pod('a'), pod('b')], **OPTIONS)
    assert lines[0] == ('purging the token cache in pod a of Deployment vllm failed: '
                        'not an SQLite database: /data/token_cache.db')
    assert len(lines) == 2


def test_a_statefulset_pod_replaced_under_its_name_during_the_loop_stops_the_run():
    pods = [dict(pod('vllm-0'), metadata={'name': 'vllm-0', 'uid': 'u0'}),
            dict(pod('vllm-1'), metadata={'name': 'vllm-1', 'uid': 'u1-new'})]
    lines = purge_failures([purged('vllm-0'), purged('vllm-1')], pods, deployment='vllm', namespace='ns',
                           backup_dir='/backups/run-1', kind='StatefulSet', uids={'vllm-0': 'u0', 'vllm-1': 'u1'})
    assert lines == [
        'pod vllm-1 of StatefulSet vllm in namespace ns was replaced during the purge (a new pod of that name, or '
        'none, runs now), so whether the new one started on the purged cache cannot be told',
        'the cache was purged in 1 other pod (backups in /backups/run-1); sessions, the configuration and the '
        'StatefulSet were left as they were: re-run to purge the pods running now']
    # the same pods, none replaced: no failure
    assert purge_failures([purged('vllm-0')], pods[:1], deployment='vllm', namespace='ns', backup_dir='/b',
                          kind='StatefulSet', uids={'vllm-0': 'u0'}) == []


def copied(result, path):
    return {'item': [result, path], 'changed': True, 'dest': f'/backups/run-1/ns_{result["item"]}/'}


def not_copied(result, path, unreachable=False):
    if unreachable:
        return {'item': [result, path], 'unreachable': True, 'msg': 'Failed to connect: pod not found\nmore'}
    return {'item': [result, path], 'failed': True, 'msg': 'file not found: ' + path}


def test_a_pod_gone_after_its_purge_and_before_its_copy_names_the_backup_left_on_its_volume():
    a, b = purged('a'), purged('b')
    lines = purge_failures([a, b], [pod('a')], **OPTIONS,
                           fetched=[copied(a, '/data/a.db'), not_copied(b, '/data/b.db', unreachable=True)])
    assert lines == [
        "pod b of Deployment vllm in namespace ns went away after its cache was purged, before its backup was "
        "copied: the backup stays on the pod's volume: /data/b.db",
        'the cache was purged in 1 other pod (backups in /backups/run-1); sessions, the configuration and the '
        'Deployment were left as they were: re-run to purge the pods running now']


def test_a_copy_that_fails_from_a_pod_still_running_keeps_its_first_line():
    a = purged('a')
    lines = purge_failures([a], [pod('a')], **OPTIONS, fetched=[not_copied(a, '/data/a.db')])
    assert lines[0] == ("copying the backup of pod a of Deployment vllm to /backups/run-1 failed: file not found: "
                        "/data/a.db; the backup stays on the pod's volume: /data/a.db")
    assert lines[1].startswith('the cache was purged in 0 other pods')


def test_a_group_recreated_after_its_leaders_purge_names_the_leader_replaced_and_its_backup():
    """A LeaderWorkerSet's group recreated as a whole (RecreateGroupOnPodRestart) when a worker is deleted: the leader,
    purged already, comes back under its name; its backup could not be copied."""
    pods = [dict(pod('vllm-0'), metadata={'name': 'vllm-0', 'uid': 'u0'})]
    leader, worker, other = purged('vllm-1'), no_result('vllm-1-1'), purged('vllm-0')
    lines = purge_failures([other, leader, worker], pods, deployment='vllm', namespace='ns', backup_dir='/b',
                           kind='LeaderWorkerSet', uids={'vllm-0': 'u0', 'vllm-1': 'u1', 'vllm-1-1': 'u11'},
                           fetched=[copied(other, '/data/0.db'), not_copied(leader, '/data/1.db', unreachable=True)])
    assert lines == [
        'pod vllm-1 of LeaderWorkerSet vllm in namespace ns was replaced during the purge (a new pod of that name, or '
        "none, runs now), so whether the new one started on the purged cache cannot be told; its backup was not "
        "copied and stays on the pod's volume: /data/1.db",
        'pod vllm-1-1 of LeaderWorkerSet vllm in namespace ns went away during the purge (deleted or replaced), so its '
        'cache was not purged',
        'the cache was purged in 1 other pod (backups in /b); sessions, the configuration and the LeaderWorkerSet '
        'were left as they were: re-run to purge the pods running now']


def test_every_backup_copied_is_no_failure():
    a = purged('a')
    assert purge_failures([a], [pod('a')], **OPTIONS, fetched=[copied(a, '/data/a.db')]) == []

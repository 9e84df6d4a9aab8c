"""Which backup of a run goes back into which pod: its own, the one content the pods gone left, or a clear refusal."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollback import rollback_plan

RUN = '/backups/run-1'
OPTIONS = {'namespace': 'ns', 'backup_dir': RUN}


def backup(pod, stamp='20260101T000000.000001Z', content='a', suffixes=('', '-wal')):
    """What ansible.builtin.find returns for one pod's backup set on the controller."""
    return [{'path': f'{RUN}/ns_{pod}/token_cache.db.{stamp}.bak{suffix}', 'checksum': f'{content}{suffix}'}
            for suffix in suffixes]


def served(plan):
    return {item['target']: (item['source'], item['restore_from'], [f.rsplit('/', 1)[1] for f in item['files']])
            for item in plan['restores']}


def test_a_pod_still_running_gets_its_own_backup_and_sidecars_back():
    files = backup('a', content='a', suffixes=('', '-wal', '-shm', '-journal')) + backup('b', content='b')
    plan = rollback_plan(files, ['b', 'a'], **OPTIONS)
    assert plan['problems'] == []
    assert served(plan) == {
        'ns/a': ('ns_a', 'token_cache.db.20260101T000000.000001Z.bak',
                 ['token_cache.db.20260101T000000.000001Z.bak', 'token_cache.db.20260101T000000.000001Z.bak-wal',
                  'token_cache.db.20260101T000000.000001Z.bak-shm',
                  'token_cache.db.20260101T000000.000001Z.bak-journal']),
        'ns/b': ('ns_b', 'token_cache.db.20260101T000000.000001Z.bak',
                 ['token_cache.db.20260101T000000.000001Z.bak', 'token_cache.db.20260101T000000.000001Z.bak-wal']),
    }
    assert plan['summary'][0] == 'ns/a: ns_a/token_cache.db.20260101T000000.000001Z.bak (its own backup)'


def test_the_newest_set_of_a_pod_directory_is_taken():
    files = backup('a', stamp='20260101T000000.000001Z') + backup('a', stamp='20260102T000000.000001Z', content='new')
    plan = rollback_plan(files, ['a'], **OPTIONS)
    assert served(plan)['ns/a'][1] == 'token_cache.db.20260102T000000.000001Z.bak'


def test_replaced_pods_get_the_backup_of_the_one_pod_gone():
    """Replicas on one volume: the first pod's purge took the only backup; the restart replaced every pod."""
    plan = rollback_plan(backup('old-1'), ['new-1', 'new-2'], **OPTIONS)
    assert plan['problems'] == []
    assert {target: item[0] for target, item in served(plan).items()} == {'ns/new-1': 'ns_old-1', 'ns/new-2': 'ns_old-1'}
    assert 'it replaced a pod of the run: the backup of the pod gone' in plan['summary'][0]


def test_replaced_pods_get_the_one_content_the_pods_gone_left():
    files = backup('old-1', content='same') + backup('old-2', content='same', stamp='20260101T000000.000002Z')
    plan = rollback_plan(files, ['new-1', 'new-2'], **OPTIONS)
    assert plan['problems'] == []
    assert {item[0] for item in served(plan).values()} == {'ns_old-2'}


@pytest.mark.parametrize('second', [
    {'content': 'other'},  # a different database
    {'content': 'same', 'suffixes': ('',)},  # the same database, but one pod had a -wal the other had not
])
def test_replaced_pods_are_refused_one_line_each_when_the_pods_gone_left_different_caches(second):
    files = backup('old-1', content='same') + backup('old-2', **second)
    plan = rollback_plan(files, ['new-2', 'new-1'], **OPTIONS)
    assert plan['problems'] == [
        f'pod {pod} in namespace ns has no backup of its own in /backups/run-1 (it replaced a pod of the run) and the '
        'pods gone left different caches (ns_old-1, ns_old-2): nothing was put back; choose the one for the pods '
        'without their own with -e vllm_dr_rollback_pod_dir=<one of them>' for pod in ('new-1', 'new-2')]


def test_an_unknown_checksum_is_never_taken_for_the_same_content():
    files = backup('old-1', content='same') + backup('old-2', content='same')
    files[0]['checksum'] = None
    assert len(rollback_plan(files, ['new-1'], **OPTIONS)['problems']) == 1


def test_the_chosen_directory_serves_the_pods_without_their_own_and_no_other():
    files = backup('old-1', content='x') + backup('old-2', content='y') + backup('kept', content='k')
    plan = rollback_plan(files, ['kept', 'new-1'], pod_dir='ns_old-2', **OPTIONS)
    assert plan['problems'] == []
    assert {target: item[0] for target, item in served(plan).items()} == {'ns/kept': 'ns_kept', 'ns/new-1': 'ns_old-2'}


def test_a_chosen_directory_that_is_not_in_the_run_is_named_with_the_choices():
    plan = rollback_plan(backup('old-1'), ['new-1'], pod_dir='ns_typo', **OPTIONS)
    assert plan['problems'] == ['vllm_dr_rollback_pod_dir ns_typo is no pod directory with a backup in /backups/run-1; '
                                'choose one of: ns_old-1']


def test_with_no_backup_of_a_pod_gone_a_new_pod_is_left_as_it_is():
    plan = rollback_plan(backup('a'), ['a', 'scaled-up'], **OPTIONS)
    assert plan['problems'] == []
    assert list(served(plan)) == ['ns/a']
    assert plan['summary'][1] == 'ns/scaled-up: no backup of its own and none of a pod gone in /backups/run-1; left as it is'


def test_files_outside_the_pod_directories_and_sidecars_without_their_database_are_not_restored():
    files = ([{'path': f'{RUN}/token_cache.db.20260101T000000.000001Z.bak', 'checksum': 'h'},
              {'path': f'{RUN}/ns_a/before-rollback/token_cache.db.20260101T000000.000001Z.bak', 'checksum': 'x'}]
             + backup('b', suffixes=('-wal',)))
    plan = rollback_plan(files, ['a'], backup_dir=RUN + '/', namespace='ns')
    assert plan['restores'] == []
    assert plan['problems'] == ['/backups/run-1/ns_b holds sidecar backups but no .bak file to restore them by; '
                                'put them back by hand or remove them']


def test_no_backup_at_all_is_nothing_to_do():
    assert rollback_plan([], ['a'], **OPTIONS) == {
        'restores': [], 'problems': [],
        'summary': ['ns/a: no backup of its own and none of a pod gone in /backups/run-1; left as it is']}

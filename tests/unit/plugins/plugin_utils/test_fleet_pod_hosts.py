"""A pod's inventory host carries its target (<target>/<namespace>/<pod>): the purge judgement still finds the pod."""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import purge_failures

OPTIONS = {'deployment': 'vllm', 'namespace': 'ns', 'backup_dir': '/backups/run-1'}


def running(name):
    return {'metadata': {'name': name}, 'status': {'phase': 'Running'}}


def test_a_failure_in_a_running_pod_named_by_its_target_keeps_the_module_message():
    results = [{'item': 'cluster-a/ns/a', 'changed': True, 'backup_files': ['/data/a.db']},
               {'item': 'cluster-a/ns/b', 'failed': True, 'msg': 'disk full'}]
    lines = purge_failures(results, [running('a'), running('b')], **OPTIONS)
    assert lines[0] == 'purging the token cache in pod b of Deployment vllm failed: disk full'


def test_a_pod_gone_is_named_by_its_pod_name_not_its_inventory_host():
    results = [{'item': 'cluster-a/ns/b', 'unreachable': True, 'msg': 'gone'}]
    lines = purge_failures(results, [running('a')], **OPTIONS)
    assert lines[0].startswith('pod b of Deployment vllm in namespace ns went away during the purge')

"""Many replicas, one copy of the token cache per volume (vllm_dr_k8s_cache_reach=auto): a volume every replica shares
is read and purged once; an emptyDir dies with its pod, so the restart alone purges it, with no exec."""

from __future__ import annotations

import os
import re

import pytest

from bench.bench_k8s import EmptyDirRuntime
from harness.k8s import GatewayRuntime
from harness.k8s_runbook import report, run

REPLICAS = 6


def scaled(kwok, tmp_path, volume: str):
    # the suite's lab workload (conftest), on a Deployment of REPLICAS pods
    from conftest import lab_workload  # pylint: disable=import-outside-toplevel,import-error
    runtime = EmptyDirRuntime if volume == 'emptyDir' else GatewayRuntime
    for work in lab_workload(kwok, tmp_path, incident=True, replicas=REPLICAS, cache_volume=volume, runtime=runtime,
                             rollout_timeout='600s'):
        work.write_inventory(vllm_dr_k8s_cache_reach='auto')
        assert work.lab.refresh('svc')[0] == 401
        yield work


@pytest.fixture
def shared_workload(kwok, tmp_path):
    yield from scaled(kwok, tmp_path, 'pvc')


@pytest.fixture
def empty_dir_workload(kwok, tmp_path):
    yield from scaled(kwok, tmp_path, 'emptyDir')


def test_a_cache_on_a_volume_every_replica_shares_is_read_and_purged_once(shared_workload):
    workload = shared_workload
    pods = sorted(pod['metadata']['name'] for pod in workload.pods())
    assert len(pods) == REPLICAS

    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    result = report(workload)
    # read in one pod, the copy judged is that pod's, and purged there alone
    inspected, purged = result['diagnosis']['kubernetes']['cache_reach']['inspect'], result['purge']['cache_pods']
    assert len(inspected) == 1 and purged == inspected, (inspected, purged)
    assert result['diagnosis']['cache']['host'].rsplit('/', 1)[-1] == inspected[0], result['diagnosis']['cache']
    reach = result['diagnosis']['kubernetes']['cache_reach']
    assert reach['strategy'] == 'shared' and reach['kind'] == 'persistentVolumeClaim'
    # one copy, one backup, kept on the controller before the purge
    fetched = [name for _root, _dirs, names in os.walk(result['purge']['backup_dir']) for name in names
               if name.startswith('token_cache.db')]
    assert len(fetched) == 1, fetched
    # and the report still names every pod
    assert sorted(result['diagnosis']['kubernetes']['pods']) == pods
    assert result['validation']['failed'] == [], result['validation']
    assert workload.lab.refresh('svc')[0] == 200


def test_a_cache_on_an_empty_dir_is_purged_by_the_restart_with_no_exec(empty_dir_workload):
    workload = empty_dir_workload
    pods = sorted(pod['metadata']['name'] for pod in workload.pods())
    assert len(pods) == REPLICAS

    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    # the diagnosis reads one copy as evidence; the purge reaches no pod
    assert len(report(workload)['diagnosis']['kubernetes']['cache_reach']['inspect']) == 1
    assert report(workload)['purge']['cache_pods'] == []
    # and says so, naming every pod the restart purges
    named = re.search(r'the restart purges it in ([\w, -]+)"', output)
    assert named and sorted(named.group(1).split(', ')) == pods, output[-6000:]
    result = report(workload)
    assert result['diagnosis']['kubernetes']['cache_reach']['strategy'] == 'restart'
    with open(workload.lab.log_path, encoding='utf-8') as log:
        why = (result['diagnosis']['cache'], result['diagnosis'].get('restored_at'), workload.runtime.restarts,
               log.read()[-3000:])
    assert result['diagnosis']['cache']['stale'] is True, why
    # replaced by the restart: every pod new, the gateway started on an empty cache, and the refresh works
    assert not set(pods) & {pod['metadata']['name'] for pod in workload.pods()}
    assert workload.runtime.restarts
    assert result['validation']['failed'] == [], result['validation']
    assert workload.lab.refresh('svc')[0] == 200

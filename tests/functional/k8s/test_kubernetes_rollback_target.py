"""A run directory belongs to one target: dr_rollback.yml on namespace B, given the run directory of namespace A, is
refused in one line before any change (it used to take A's pods for "the pods gone" and put A's cache into B's)."""

from __future__ import annotations

import json
import re

import pytest

from harness.k8s_runbook import digest
from test_kubernetes_rollback_per_pod import backup_set, rollback


@pytest.mark.parametrize('recorded', [False, True], ids=['pod directories only', 'target.json'])
def test_a_run_directory_of_another_namespace_is_refused_before_any_change(healthy_workload, tmp_path, recorded):
    workload = healthy_workload
    other = f'{workload.namespace}-a'
    run_dir = tmp_path / 'run-a'
    backup_set(run_dir, other, 'vllm-5c8d9-abcde', 'namespace a')
    server = workload.kube.kubectl('config', 'view', '--minify', '-o', 'jsonpath={.clusters[0].cluster.server}')
    if recorded:
        (run_dir / 'target.json').write_text(json.dumps(
            {'cluster': server, 'namespace': other, 'deployment': 'vllm', 'pods': {'vllm-5c8d9-abcde': 'uid-a'}}))
    before = digest(workload.lab.cache_path)

    rc, output = rollback(workload, run_dir)
    assert rc != 0, output[-4000:]
    if recorded:
        expected = (rf'{re.escape(str(run_dir))} holds the backups of Deployment vllm in namespace {other} of '
                    rf'{re.escape(server)}, not of Deployment vllm in namespace {workload.namespace} of '
                    rf'{re.escape(server)} \(its namespace differs\); give the backup directory of a run on this target')
    else:
        expected = (rf'{re.escape(str(run_dir))} holds the backups of pods in namespace {other}, not of Deployment '
                    rf'vllm in namespace {workload.namespace} of {re.escape(server)}; give the backup directory')
    assert re.search(expected, output), output[-4000:]
    assert digest(workload.lab.cache_path) == before
    assert not (tmp_path / 'run-a' / 'before-rollback').exists()

"""A run directory belongs to one target: the rollback refuses, in one line, the backups of another cluster,
namespace or Deployment, and judges a directory with no record by the namespaces of its pod directories."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollback import target_mismatch

RUN = '/backups/run-1'
HERE = {'cluster': 'https://127.0.0.1:6443', 'namespace': 'b', 'deployment': 'vllm'}
FILES = [{'path': f'{RUN}/a_vllm-1/token_cache.db.20260101T000000.000000Z.bak'}]


def test_the_run_of_this_target_is_accepted():
    recorded = dict(HERE, pods={'vllm-1': 'uid-1'})
    assert target_mismatch(recorded, HERE, [{'path': f'{RUN}/b_vllm-1/t.bak'}], backup_dir=RUN) is None


@pytest.mark.parametrize('key, value', [('namespace', 'a'), ('cluster', 'https://10.0.0.9:6443'),
                                        ('deployment', 'canary')])
def test_a_run_of_another_target_is_refused_naming_both(key, value):
    recorded = dict(HERE, **{key: value})
    problem = target_mismatch(recorded, HERE, FILES, backup_dir=RUN)
    assert '\n' not in problem
    assert problem.startswith(f'{RUN} holds the backups of Deployment {recorded["deployment"]} in namespace '
                              f'{recorded["namespace"]} of {recorded["cluster"]}, not of Deployment vllm in namespace b '
                              f'of https://127.0.0.1:6443 (its {key} differs); give the backup directory of a run on '
                              'this target')


def test_a_run_directory_without_a_record_is_judged_by_its_pod_directories():
    assert target_mismatch(None, HERE, FILES, backup_dir=RUN) == (
        f'{RUN} holds the backups of pods in namespace a, not of Deployment vllm in namespace b of '
        'https://127.0.0.1:6443; give the backup directory of a run on this target, or run dr_rollback.yml against '
        'the target the run was made for')
    assert target_mismatch(None, HERE, [{'path': f'{RUN}/b_vllm-x/t.bak'}, {'path': f'{RUN}/sessions.jsonl'}],
                           backup_dir=RUN) is None

"""Every filter of the collection is documented as itself, the way ansible-doc and the docs site find it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.inferops.vllm_dr.plugins.filter import (
    detection_metrics, detection_verdict, dr_audit, fleet_report, log_evidence, recovery_verdict, rollback_plan,
    rollout_api_error, rollout_complete, rollout_new_hash, rollout_old_pods, rollout_pods, rollout_preconditions,
    rollout_purge_failures, rollout_status, rollout_unfinished, rollout_wait_outcome, store_sweeper, validation_metrics,
    validation_verdict, yaml_set)

MODULES = (detection_metrics, detection_verdict, dr_audit, fleet_report, log_evidence, recovery_verdict, rollback_plan,
           rollout_api_error, rollout_complete, rollout_new_hash, rollout_old_pods, rollout_pods, rollout_preconditions,
           rollout_purge_failures, rollout_status, rollout_unfinished, rollout_wait_outcome, store_sweeper,
           validation_metrics, validation_verdict, yaml_set)
FILTERS = sorted(name for module in MODULES for name in module.FilterModule().filters())


def test_every_filter_file_is_listed_here():
    here = {module.__name__.rsplit('.', 1)[1] + '.py' for module in MODULES}
    directory = os.path.dirname(rollout_complete.__file__)
    assert here == {name for name in os.listdir(directory) if name.endswith('.py') and name != '__init__.py'}


@pytest.fixture(scope='module')
def docs():
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-doc'), '-t', 'filter', '--json']
                         + [f'inferops.vllm_dr.{name}' for name in FILTERS],
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize('name', FILTERS)
def test_filter_has_its_own_documentation(name, docs):
    doc = docs[f'inferops.vllm_dr.{name}']['doc']
    assert doc['name'] == name
    assert f'inferops.vllm_dr.{name}' in docs[f'inferops.vllm_dr.{name}']['examples']

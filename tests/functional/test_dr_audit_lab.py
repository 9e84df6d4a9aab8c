"""dr_audit.yml on the incident lab: before hardening the missing items are named, after it they are present."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from xml.etree import ElementTree

import pytest
import yaml

from harness.lab_runs import running_lab
from harness.playbooks import playbook as run_playbook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES = os.path.join(ROOT, 'extensions', 'observability', 'prometheus', 'vllm-dr.rules.yml')


@pytest.fixture
def lab(tmp_path):
    with running_lab(tmp_path) as running:
        yield running


def audit(lab, *extra):
    return run_playbook(lab.inventory_path, 'dr_audit.yml', *extra)


def digest(path):
    with open(path, 'rb') as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def report(lab):
    return json.loads((lab.reports / 'lab.audit.json').read_text())['audit']


def statuses(result):
    return {item['id']: item['status'] for item in result['items']}


def harden(lab, tmp_path):
    """What an operator does: refresh_on_startup on, the cache's directory out of snapshots, the rules installed."""
    with open(lab.config_path, encoding='utf-8') as handle:
        config = yaml.safe_load(handle)
    config['session_state_store']['refresh_on_startup'] = True
    with open(lab.config_path, 'w', encoding='utf-8') as handle:
        yaml.safe_dump(config, handle, sort_keys=False)
    rules_dir = tmp_path / 'prometheus-rules'
    rules_dir.mkdir()
    shutil.copy(RULES, rules_dir / 'vllm-dr.rules.yml')
    return json.dumps({'vllm_dr_audit_snapshot_excludes': [os.path.dirname(lab.cache_path)],
                       'vllm_dr_audit_rules_files': [str(rules_dir / 'vllm-dr.rules.yml')]})


def test_audit_names_what_is_missing_before_hardening_and_finds_it_after(lab, tmp_path):
    before = {'config': digest(lab.config_path), 'cache': digest(lab.cache_path)}
    rc, output = audit(lab, '--check')
    assert rc == 0, output[-3000:]
    assert {'config': digest(lab.config_path), 'cache': digest(lab.cache_path)} == before
    result = report(lab)
    assert result['verdict'] == 'not ready'
    assert statuses(result) == {'cache_external': 'advice', 'refresh_on_startup': 'fail',
                                'cache_outside_snapshots': 'fail', 'alert_rules': 'fail', 'probe_session': 'pass'}
    markdown = (lab.reports / 'lab.audit.md').read_text()
    assert markdown.startswith(f'# vLLM restore readiness on lab: NOT READY ({result["score"]}%)')
    assert 'refresh_on_startup: true' in markdown and 'vllm_dr_audit_rules_files' in markdown
    assert 'external token cache' in markdown, 'P1: the cache is on disk while the store is external'
    suite = ElementTree.parse(lab.reports / 'lab.audit.junit.xml').getroot().find('testsuite')
    assert suite.get('tests') == '5' and suite.get('failures') == '3'

    rc, output = audit(lab, '-e', 'vllm_dr_audit_fail_below=100')
    assert rc != 0
    assert f'audit score {result["score"]}% is below 100%' in output

    extra = harden(lab, tmp_path)
    rc, output = audit(lab, '-e', extra, '-e', 'vllm_dr_audit_fail_below=100')
    assert rc == 0, output[-3000:]
    result = report(lab)
    assert result['verdict'] == 'ready' and result['score'] == 100 and result['failed'] == []
    assert statuses(result) == {'cache_external': 'advice', 'refresh_on_startup': 'pass',
                                'cache_outside_snapshots': 'pass', 'alert_rules': 'pass', 'probe_session': 'pass'}
    suite = ElementTree.parse(lab.reports / 'lab.audit.junit.xml').getroot().find('testsuite')
    assert suite.get('failures') == '0'
    assert 'lab-secret' not in output

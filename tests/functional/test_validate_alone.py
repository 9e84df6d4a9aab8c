"""The validate role on its own, without the restore role's diagnosis or a purge before it, against the lab."""

from __future__ import annotations

import json

import pytest
import yaml

from harness.playbooks import playbook, recap
from harness.reports import report_path
from lab.labctl import Lab

PLAY = [{'name': 'Validate only', 'hosts': 'all', 'gather_facts': False, 'roles': ['inferops.vllm_dr.validate']}]


@pytest.fixture
def healthy_lab(tmp_path):
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=3)
    try:
        yield lab
    finally:
        lab.down()


def test_validate_runs_alone_and_writes_its_report(healthy_lab, tmp_path):
    inventory = tmp_path / 'inventory.yml'
    inventory.write_text(yaml.safe_dump(healthy_lab.inventory(str(tmp_path / 'reports'))))
    play = tmp_path / 'validate.yml'
    play.write_text(yaml.safe_dump(PLAY))
    rc, output = playbook(str(inventory), str(play))
    assert rc == 0, output[-3000:]
    assert recap(output)['failed'] == 0
    report = json.loads(report_path(tmp_path / 'reports', 'lab.json').read_text())
    assert report['passed'] is True and report['diagnosis'] == {}
    assert report['purge'] == {'not_run': 'no recovery needed'} and report['restarted_at'] is None
    assert [check['ok'] for check in report['validation']['checks']] == [True, True, True, True]
    assert 'SECRET' not in output and 'lab-secret' not in output

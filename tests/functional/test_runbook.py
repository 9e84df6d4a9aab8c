"""dr_restore.yml and dr_rollback.yml against the incident lab, through ansible-playbook."""

from __future__ import annotations

import hashlib
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from xml.etree import ElementTree

import pytest
import redis
import yaml

from harness.caches import cache_rows
from harness.lab_runs import incident_lab
from harness.playbooks import playbook as run_playbook
from harness.playbooks import recap
from harness.reports import report_path
from harness.sessions import dump_redis
from lab.labctl import Lab


@pytest.fixture
def broken_lab(tmp_path):
    """The lab after the incident: snapshot taken, tokens rotated at the provider, snapshot restored."""
    with incident_lab(tmp_path) as lab:
        yield with_inventory(lab, tmp_path)


def with_inventory(lab, tmp_path):
    """The lab's runbook inventory written to a file; reports go to tmp_path/reports."""
    inventory = tmp_path / 'inventory.yml'
    inventory.write_text(yaml.safe_dump(lab.inventory(str(tmp_path / 'reports'))))
    lab.inventory_path = str(inventory)
    lab.reports = tmp_path / 'reports'
    return lab


def playbook(lab, name='dr_restore.yml', *extra):
    return run_playbook(lab.inventory_path, name, *extra)


def digest(path: str):
    if not os.path.exists(path):
        return None
    with open(path, 'rb') as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def store(lab):
    return redis.Redis(host='127.0.0.1', port=lab.state['ports']['redis'], socket_timeout=5)


def lab_state(lab):
    """What the runbook may change: the store, the cache, the config, and the running gateway."""
    return {'store': dump_redis(store(lab)),
            'cache': digest(lab.cache_path), 'cache_mtime': os.path.getmtime(lab.cache_path),
            'config': digest(lab.config_path), 'gateway_pid': lab.state['pids']['gateway']}


def test_runbook_recovers_the_lab_and_writes_a_well_formed_report(broken_lab):
    assert broken_lab.refresh('svc')[0] == 401
    rc, output = playbook(broken_lab)
    assert rc == 0, output[-3000:]
    assert recap(output)['failed'] == 0
    assert broken_lab.refresh('svc')[0] == 200, 'the service session refreshes again'
    report = json.loads(report_path(broken_lab.reports, 'lab.json').read_text())
    assert report['passed'] is True and report['diagnosis']['recovery_needed'] is True
    assert report['diagnosis']['probe']['classification'] == 'stale_token'
    assert all(check['ok'] for check in report['validation']['checks'])
    assert os.path.exists(report['purge']['cache_backups'][0]) and os.path.exists(report['purge']['sessions_backup'])
    suite = ElementTree.parse(report_path(broken_lab.reports, 'lab.junit.xml')).getroot().find('testsuite')
    assert suite.get('tests') == '4' and suite.get('failures') == '0'
    assert len(suite.findall('testcase')) == 4
    markdown = report_path(broken_lab.reports, 'lab.md').read_text()
    assert markdown.startswith('# vLLM token recovery on lab: PASSED')
    assert 'SECRET' not in output and 'lab-secret' not in output


def test_check_mode_touches_nothing_and_shows_what_it_would_do(broken_lab):
    before = lab_state(broken_lab)
    rc, output = playbook(broken_lab, 'dr_restore.yml', '--check')
    assert rc == 0, output[-3000:]
    assert lab_state(broken_lab) == before
    assert re.search(r'TASK \[inferops\.vllm_dr\.purge : Purge the token cache, keeping a backup\] \*+\nchanged: \[lab\]',
                     output)
    assert 'check mode, not judged' in output
    # not judged: a CI reading the JUnit file does not fail a dry run
    suite = ElementTree.parse(report_path(broken_lab.reports, 'lab.junit.xml')).getroot().find('testsuite')
    assert suite.get('failures') == '0' and suite.get('skipped') == suite.get('tests') == '4'
    assert len(suite.findall('testcase/skipped')) == 4


def test_second_run_on_a_healthy_system_purges_nothing_and_does_not_restart(broken_lab):
    rc, output = playbook(broken_lab)
    assert rc == 0, output[-3000:]
    broken_lab.state = broken_lab._load()  # pylint: disable=protected-access
    pid = broken_lab.state['pids']['gateway']
    rc, output = playbook(broken_lab)
    assert rc == 0, output[-3000:]
    purge_tasks = re.findall(r'TASK \[inferops\.vllm_dr\.purge : [^\]]+\] \*+\n(\w+):', output)
    assert purge_tasks and all(status in ('ok', 'skipping') for status in purge_tasks[1:])
    assert 'RUNNING HANDLER' not in output
    broken_lab.state = broken_lab._load()  # pylint: disable=protected-access
    assert broken_lab.state['pids']['gateway'] == pid


def test_rollback_puts_back_exactly_what_the_run_removed(broken_lab):
    before = dict(lab_state(broken_lab), cache_rows=cache_rows(broken_lab.cache_path))
    rc, output = playbook(broken_lab)
    assert rc == 0, output[-3000:]
    report = json.loads(report_path(broken_lab.reports, 'lab.json').read_text())
    rc, output = playbook(broken_lab, 'dr_rollback.yml', '-e', f'vllm_dr_rollback_dir={report["purge"]["backup_dir"]}')
    assert rc == 0, output[-3000:]
    # the cache rows the run removed are back; the row the restarted service wrote since (its own session) is kept
    cached = cache_rows(broken_lab.cache_path)
    assert {sid: row for sid, row in cached.items() if sid != 'svc'} == {
        sid: row for sid, row in before['cache_rows'].items() if sid != 'svc'}
    assert cached['svc'] != before['cache_rows']['svc']
    after = dump_redis(store(broken_lab))
    service = b'vllm:session:svc'
    # the restarted service signed its own session in again; every swept session is back as it was
    assert {k: v for k, v in after.items() if k != service} == {k: v for k, v in before['store'].items() if k != service}


@pytest.fixture
def healthy_lab(tmp_path):
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=2)
    try:
        yield with_inventory(lab, tmp_path)
    finally:
        lab.down()


def test_a_dry_run_is_not_judged_in_its_reports_neither_passed_nor_failed(healthy_lab):
    """A dry run judged nothing (its probe made no request, so that check cannot pass): the JSON, the Markdown and
    the summary say 'not judged', none says PASSED or FAILED, and the run does not fail."""
    rc, output = playbook(healthy_lab, 'dr_restore.yml', '--check')
    assert rc == 0, output[-3000:]
    report = json.loads(report_path(healthy_lab.reports, 'lab.json').read_text())
    assert report['check_mode'] is True
    assert (report['outcome'], report['passed']) == ('not judged', False)
    assert report['reason'] == 'check mode: nothing was changed or judged'
    markdown = report_path(healthy_lab.reports, 'lab.md').read_text()
    assert markdown.startswith('# vLLM token recovery on lab: check mode, not judged\n'), markdown[:200]
    assert 'result: check mode, not judged' in output
    assert 'result: PASSED' not in output and 'result: FAILED' not in output


def test_drill_breaks_the_lab_recovers_it_and_exits_zero(healthy_lab):
    rc, output = playbook(healthy_lab, 'dr_drill.yml')
    assert rc == 0, output[-3000:]
    report = json.loads(report_path(healthy_lab.reports, 'lab.json').read_text())
    assert report['passed'] is True and report['diagnosis']['probe']['classification'] == 'stale_token'


def test_drill_exit_code_tells_the_truth_when_the_recovery_does_not_work(healthy_lab):
    # sweeping only expired sessions cannot help: the snapshot's tokens were revoked, not expired
    rc, output = playbook(healthy_lab, 'dr_drill.yml', '-e', 'vllm_dr_sweep_select=expired')
    assert rc != 0
    assert 'validation failed: ' in output and 'refresh probe is healthy' in output
    suite = ElementTree.parse(report_path(healthy_lab.reports, 'lab.junit.xml')).getroot().find('testsuite')
    assert suite.get('failures') != '0'


def test_concurrent_runs_sharing_a_report_directory_keep_their_own_reports_and_name_them(healthy_lab):
    """Two runs at the same time, one report directory: one passes, one fails (its health URL answers nothing).
    Each writes a directory of its own, and the failed run's message names its own report, which says FAILED.
    Each probes a session of its own: two probes of one session at once present the same refresh token, the provider
    rotates it on the first, and the service logs the second's refusal, which the other run's log check would see."""
    with ThreadPoolExecutor(2) as pool:
        passing = pool.submit(playbook, healthy_lab, 'dr_restore.yml', '--tags', 'validate')
        failing = pool.submit(playbook, healthy_lab, 'dr_restore.yml', '--tags', 'validate',
                              '-e', 'vllm_dr_health_url=http://127.0.0.1:9/healthz', '-e', 'vllm_dr_health_timeout=2',
                              '-e', 'vllm_dr_probe_session=s1')
        (rc_passed, passed_output), (rc_failed, failed_output) = passing.result(), failing.result()
    assert rc_passed == 0, passed_output[-3000:]
    assert rc_failed != 0, failed_output[-3000:]
    runs = sorted(path for path in healthy_lab.reports.iterdir() if not path.is_symlink())
    assert len(runs) == 2 and all((run / 'lab.json').is_file() for run in runs), runs
    named = re.search(r'report: (\S+/lab\.json)', failed_output)
    assert named, failed_output[-3000:]
    assert os.path.dirname(named.group(1)) in {str(run) for run in runs}
    with open(named.group(1), encoding='utf-8') as handle:
        assert json.load(handle)['passed'] is False, 'the failed run named the report it wrote, not the other run\'s'
    others = [run for run in runs if str(run) != os.path.dirname(named.group(1))]
    assert json.loads((others[0] / 'lab.json').read_text())['passed'] is True
    assert report_path(healthy_lab.reports, 'lab.json').parent in runs, 'latest points at one of the two runs'

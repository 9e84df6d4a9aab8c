"""The fleet report: each target's status from what it left behind, and the fleet failed when one target failed."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.filter.__internal import fleet_report as fleet_filter
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._fleet_report import (
    fleet_junit, fleet_markdown, fleet_report)

NOW = '2026-12-03T12:00:00Z'


def passed(host, platform='kubernetes'):
    return {'host': host, 'report': f'/reports/{host}.json',
            'diagnosis': {'platform': platform, 'recovery_needed': True},
            'validation': {'checks': [{'name': 'service answers /healthz', 'ok': True, 'detail': 'HTTP 200'}],
                           'failed': [], 'check_mode': False}}


def check_failed(host):
    return {'host': host, 'report': f'/reports/{host}.json', 'diagnosis': {'platform': 'host'},
            'validation': {'checks': [{'name': 'service answers /healthz', 'ok': False, 'detail': 'HTTP 503'},
                                      {'name': 'refresh probe is healthy', 'ok': True, 'detail': 'ok'}],
                           'failed': ['service answers /healthz'], 'check_mode': False}}


def stopped(host):
    """What validate's stopped_run entry point leaves when a step failed before validation."""
    detail = "failed at step 'Fail when the Deployment is missing': Deployment vllm not found in namespace gone"
    return {'host': host, 'report': f'/reports/{host}.json',
            'failure': {'step': 'Fail when the Deployment is missing', 'reason': 'Deployment vllm not found'},
            'validation': {'checks': [{'name': 'the runbook reached validation', 'ok': False, 'detail': detail}],
                           'failed': ['the runbook reached validation'], 'check_mode': True, 'stopped': True}}


def test_a_failed_check_fails_its_target_and_the_fleet_the_others_pass():
    fleet = fleet_report([passed('a'), check_failed('b'), passed('c', 'host')], validated=True, generated_at=NOW)
    assert [(t['host'], t['status']) for t in fleet['targets']] == [('a', 'passed'), ('b', 'failed'), ('c', 'passed')]
    assert fleet['passed'] is False and fleet['failed'] == ['b'] and fleet['total'] == 3
    assert fleet['targets'][1]['reason'] == 'service answers /healthz: HTTP 503'
    assert fleet['counts'] == {'passed': 2, 'failed': 1, 'not judged': 0, 'not validated': 0}
    assert fleet['report_dir'] == '/reports'


def test_a_step_failed_before_validation_is_a_failure_with_the_step_even_in_check_mode():
    fleet = fleet_report([stopped('gone')], validated=True, generated_at=NOW)
    line = fleet['targets'][0]
    assert line['status'] == 'failed' and "'Fail when the Deployment is missing'" in line['reason']
    assert fleet['passed'] is False


def test_a_target_that_left_no_report_fails_with_the_reason_and_without_one():
    fleet = fleet_report([{'host': 'dark', 'platform': 'host'}], validated=True, generated_at=NOW)
    line = fleet['targets'][0]
    assert line['status'] == 'failed' and 'stopped before writing its report' in line['reason']
    assert line['report'] is None and fleet['report_dir'] is None


def test_a_recorded_failure_without_a_report_still_names_the_step():
    fleet = fleet_report([{'host': 'x', 'failure': {'step': 'Write the report', 'reason': 'disk full'}}],
                         validated=True, generated_at=NOW)
    assert fleet['targets'][0]['reason'] == "failed at step 'Write the report': disk full"


def test_check_mode_and_a_diagnosis_only_run_fail_no_target():
    dry = passed('a')
    dry['validation']['check_mode'] = True
    fleet = fleet_report([dry, {'host': 'b'}], validated=False, generated_at=NOW)
    assert [t['status'] for t in fleet['targets']] == ['not judged', 'not validated']
    assert fleet['passed'] is True and fleet['failed'] == []


def test_junit_has_one_case_per_target_a_failure_for_the_failed_and_escapes_names():
    fleet = fleet_report([passed('ns<a>'), check_failed('b&c'), {'host': 'd'}], validated=False, generated_at=NOW)
    suite = ElementTree.fromstring(fleet_junit(fleet)).find('testsuite')
    cases = {case.get('name'): case for case in suite.findall('testcase')}
    assert set(cases) == {'ns<a>', 'b&c', 'd'}
    assert suite.get('tests') == '3' and suite.get('failures') == '1' and suite.get('skipped') == '1'
    assert cases['b&c'].find('failure').get('message') == 'service answers /healthz: HTTP 503'
    assert cases['ns<a>'].find('failure') is None and cases['d'].find('skipped') is not None


def test_markdown_lists_every_target_and_keeps_the_table_whole():
    failing = check_failed('b')
    failing['validation']['checks'][0]['detail'] = 'HTTP 503 | upstream\nreset'
    text = fleet_markdown(fleet_report([passed('a'), failing], validated=True, generated_at=NOW))
    assert text.startswith('# vLLM token recovery, fleet of 2: FAILED')
    rows = [line for line in text.splitlines() if line.startswith('| a ') or line.startswith('| b ')]
    assert len(rows) == 2 and rows[1].count(' | ') == 4 and 'HTTP 503 \\| upstream reset' in rows[1]


class Facts(dict):
    """hostvars[host] as the filter reads it."""


def test_the_filter_takes_only_the_marked_hosts_in_inventory_order_and_renders_a_report_made_before():
    hostvars = {
        'pod-like': Facts(),  # added by add_host, no target of the run
        'lab': Facts(_vllm_dr_fleet_started_at=NOW, vllm_dr_validation=passed('lab')['validation'],
                     _vllm_dr_report_file='/r/lab.json'),
        'ns-b': Facts(_vllm_dr_fleet_started_at=NOW, vllm_dr_platform='kubernetes'),
    }
    fleet = fleet_filter(['pod-like', 'lab', 'ns-b'], hostvars, generated_at=NOW)
    assert [t['host'] for t in fleet['targets']] == ['lab', 'ns-b']
    assert fleet['targets'][1] | {'status': 'failed', 'platform': 'kubernetes'} == fleet['targets'][1]
    assert fleet_filter(fleet, hostvars, format='junit').startswith('<?xml')
    with pytest.raises(AnsibleFilterError, match='generated_at is missing'):
        fleet_filter(['lab'], hostvars)
    with pytest.raises(AnsibleFilterError, match="format 'html' is none of"):
        fleet_filter(fleet, hostvars, format='html')


def test_a_report_that_could_not_be_written_fails_a_target_that_passed_validation():
    unwritten = passed('a')
    del unwritten['report']
    unwritten['report_dir'] = '/read-only/reports'
    unwritten['failure'] = {'step': 'Write the report (JSON, JUnit XML, Markdown)',
                            'reason': 'cannot write the report file /read-only/reports/a.json (Read-only file system)'}
    fleet = fleet_report([unwritten, passed('b')], validated=True, generated_at=NOW)
    line = fleet['targets'][0]
    assert line['status'] == 'failed' and 'Read-only file system' in line['reason']
    assert fleet['passed'] is False and fleet['failed'] == ['a']
    assert fleet['report_dir'] == '/reports', 'beside the reports that were written'


def test_the_fleet_report_goes_beside_where_the_targets_reports_were_to_go_when_none_was_written():
    fleet = fleet_report([{'host': 'x', 'report_dir': '/srv/reports',
                           'failure': {'step': 'Write the report', 'reason': 'disk full'}}],
                         validated=True, generated_at=NOW)
    assert fleet['report_dir'] == '/srv/reports'

"""After the whole runbook: the reports are there, well formed and green; the service answers."""

from __future__ import annotations

import json
from xml.etree import ElementTree


def report(host, lab_vars, ext):
    # each run writes <vllm_dr_report_dir>/<run>/; latest points at the last one
    return host.file(f'{lab_vars["vllm_dr_report_dir"]}/latest/lab.{ext}')


def test_reports_exist_with_private_modes(host, lab_vars):
    for ext in ('json', 'junit.xml', 'md'):
        item = report(host, lab_vars, ext)
        assert item.is_file and item.mode == 0o640


def test_json_report_passed_every_check(host, lab_vars):
    data = json.loads(report(host, lab_vars, 'json').content_string)
    assert data['passed'] is True
    assert [check['ok'] for check in data['validation']['checks']] == [True] * 4


def test_junit_report_parses_with_no_failure(host, lab_vars):
    suite = ElementTree.fromstring(report(host, lab_vars, 'junit.xml').content_string).find('testsuite')
    assert suite.get('failures') == '0' and len(suite.findall('testcase')) == 4


def test_service_answers_healthz(host, lab_vars):
    out = host.run(f'python3 -c "import urllib.request; print(urllib.request.urlopen(\'{lab_vars["vllm_dr_health_url"]}\').status)"')
    assert out.stdout.strip() == '200'

"""A fleet in one run: two namespaces on the cluster and a plain host, in parallel, one of them broken on purpose.

Each target is recovered (or fails) on its own, each writes its own report, and one fleet report lists them all.
"""

from __future__ import annotations

import json
from xml.etree import ElementTree

import yaml

from harness.k8s_runbook import digest
from harness.lab_runs import incident_lab
from harness.playbooks import playbook, recap
from harness.reports import report_path
from harness.servers import free_port


def fleet_inventory(tmp_path, targets: dict) -> str:
    """One inventory, every target in group vllm, every report in one directory."""
    hosts = {name: {key: value for key, value in host.items() if key != 'vllm_dr_report_dir'}
             for name, host in targets.items()}
    inventory = {'all': {'vars': {'vllm_dr_report_dir': str(tmp_path / 'reports')},
                         'children': {'vllm': {'hosts': hosts}}}}
    path = tmp_path / 'fleet.yml'
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return str(path)


def read(path):
    with open(path, encoding='utf-8') as handle:
        return json.load(handle)


def test_fleet_recovers_each_namespace_on_its_own_and_reports_the_broken_host(workload, other_workload, tmp_path):
    with incident_lab(tmp_path / 'host') as host_lab:
        broken = host_lab.inventory()['all']['children']['vllm']['hosts']['lab']
        # the host's session store is down: nothing listens where it is said to be
        broken['vllm_dr_store'] = dict(broken['vllm_dr_store'], login_port=free_port())
        cache_before = digest(host_lab.cache_path)
        inventory = fleet_inventory(tmp_path, {'ns-a': workload.host, 'ns-b': other_workload.host, 'lab': broken})

        rc, output = playbook(inventory, 'dr_restore.yml', '--forks', '3', env=workload.kube.env)

        assert rc != 0, output[-4000:]
        reports = tmp_path / 'reports'
        # each namespace recovered on its own: its pods purged through hosts named by the target, restarted, proved
        for name, work in (('ns-a', workload), ('ns-b', other_workload)):
            report = read(report_path(reports, f'{name}.json'))
            assert report['passed'] is True, (name, report['validation'], output[-6000:])
            assert report['diagnosis']['kubernetes']['namespace'] == work.namespace
            assert work.runtime.restarts, f'{name}: the rollout did not restart the gateway behind the pods'
            assert work.lab.refresh('svc')[0] == 200, name
            purged = report['purge']['cache_pods']
            # every pod the cache reach chose (on the shared volume, the first: one copy), and only those
            reach = report['diagnosis']['kubernetes']['cache_reach']
            assert reach['purge'] and purged == reach['purge'], (name, purged, reach)
            assert recap(output, name)['failed'] == 0
        # the broken host failed in its diagnosis, touched nothing, and says why in its own report
        lab = read(report_path(reports, 'lab.json'))
        assert lab['passed'] is False
        assert lab['validation']['failed'] == ['the runbook reached validation']
        assert 'Report the sessions the sweep would remove' in lab['validation']['checks'][0]['detail']
        assert digest(host_lab.cache_path) == cache_before
        assert recap(output, 'lab')['failed'] == 1

        # one fleet report, every target in it, in inventory order, the broken one failed with its reason
        fleet = read(report_path(reports, 'fleet', 'fleet.json'))
        assert [(t['host'], t['status']) for t in fleet['targets']] == [
            ('ns-a', 'passed'), ('ns-b', 'passed'), ('lab', 'failed')]
        assert fleet['passed'] is False and fleet['failed'] == ['lab']
        assert 'Report the sessions the sweep would remove' in fleet['targets'][2]['reason']
        assert fleet['targets'][2]['report'] == str(report_path(reports, 'lab.json'))
        suite = ElementTree.parse(report_path(reports, 'fleet', 'fleet.junit.xml')).getroot().find('testsuite')
        assert suite.get('tests') == '3' and suite.get('failures') == '1'
        assert [case.get('name') for case in suite.findall('testcase') if case.find('failure') is not None] == ['lab']
        markdown = report_path(reports, 'fleet', 'fleet.md').read_text()
        assert markdown.startswith('# vLLM token recovery, fleet of 3: FAILED')
        assert all(f'| {name} |' in markdown for name in ('ns-a', 'ns-b', 'lab'))
        assert 'vllm-dr-lab-secret' not in output

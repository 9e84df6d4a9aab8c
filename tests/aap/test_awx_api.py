"""The AAP assets in the real AWX 24.6.1: extensions/aap/configure.yml loads every asset with the awx.awx modules of
the `ansible` package into AWX's API (tests/harness/awx.py starts AWX from the vendored source); a second run changes
nothing; the workflow is launched, stops at its approval node, is approved, and AWX runs the restore job to
`successful` against the incident lab, the credentials' secrets injected by AWX, the survey answers as extra vars.
Nothing AWX keeps or shows (API records, job events, stdout, its logs) holds a secret in clear.

The one change from a real AAP: the job runs through tools/aap/ee-worker.py in the environment the EE definition
installs instead of in the EE image (docs/aap.md). Run by tools/aap.sh (`make aap`).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

from harness.aap_assets import load_assets
from harness.awx import AwxServer, ee_environment
from harness.secret_scan import find_leaks, idp_tokens
from lab.labctl import Lab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
AAP = os.path.join(ROOT, 'extensions', 'aap')
ASSETS = load_assets()

# The credentials' inputs, as a site keeps them in its vault-encrypted vars file
SECRETS = {
    'vLLM DR session store': {'login_password': 'store-pass-5e0b7d29c4'},
    'vLLM DR introspection client': {'client_id': 'vllm-dr', 'client_secret': 'vllm-dr-lab-secret'},
    'vLLM DR Kubernetes kubeconfig': {
        'kubeconfig': 'apiVersion: v1\nkind: Config\nusers:\n- name: dr\n  user: {token: k8s-bearer-6a1c93e0d7f24b58}\n'},
}
SECRET_VALUES = {'store-pass-5e0b7d29c4', 'vllm-dr-lab-secret', 'k8s-bearer-6a1c93e0d7f24b58'}
# The survey answers: the lab's tokens were rotated, not expired
ANSWERS = {'vllm_dr_sweep_select': 'revoked'}
TIMES = {}


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)


def timed(name):
    class _Timer:
        def __enter__(self):
            self.start = time.monotonic()

        def __exit__(self, *exc):
            TIMES[name] = round(time.monotonic() - self.start, 1)
    return _Timer()


@pytest.fixture(scope='module')
def awx(tmp_path_factory):
    work = tmp_path_factory.mktemp('awx')
    with timed('build (AWX, receptor, migrated database)'):
        build = run(['bash', os.path.join(ROOT, 'tools', 'aap', 'awx-build.sh')], timeout=3600)
        assert build.returncode == 0, build.stderr[-4000:]
    cache = build.stdout.strip().splitlines()[-1]
    with timed('EE environment'):
        built = run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'build', '--force', '--output-path',
                     str(work), ROOT])
        assert built.returncode == 0, built.stderr
        ee_python = ee_environment(glob.glob(str(work / '*.tar.gz'))[0], os.path.join(ROOT, 'build', 'aap'))
    with timed('AWX start'):
        server = AwxServer(cache, os.path.join(cache, 'receptor-cl'), ee_python,
                           keep=bool(os.environ.get('VLLM_DR_KEEP_AWX'))).start()
    try:
        yield server
    finally:
        server.stop()
        with open(os.path.join(ROOT, 'reports', 'aap-awx-times.json'), 'w', encoding='utf-8') as handle:
            json.dump(TIMES, handle, indent=1)


@pytest.fixture(scope='module')
def lab():
    base = tempfile.mkdtemp(prefix='vllm-dr-awx-lab-')
    labctl = [sys.executable, os.path.join(ROOT, 'tests', 'lab', 'labctl.py'), '--state', base]
    up = run(labctl + ['up', '--sessions', '3', '--redis-password', SECRETS['vLLM DR session store']['login_password']])
    assert up.returncode == 0, up.stderr
    try:
        for step in ('snapshot', 'rotate', 'restore'):
            out = run(labctl + [step])
            assert out.returncode == 0, out.stderr
        yield Lab(base)
    finally:
        run(labctl + ['down'])
        Lab(base).down()
        shutil.rmtree(base, ignore_errors=True)


def project_repository(directory: str) -> str:
    """A git repository with extensions/aap/project/ at its top, as configure.yml asks for."""
    for name in os.listdir(os.path.join(AAP, 'project')):
        shutil.copy(os.path.join(AAP, 'project', name), os.path.join(directory, name))
    git = ['git', '-C', directory, '-c', 'user.name=vllm-dr', '-c', 'user.email=vllm-dr@localhost']
    for command in (['init', '-q', '-b', 'main'], ['add', '.'], ['commit', '-q', '-m', 'vLLM DR project']):
        out = run(git + command)
        assert out.returncode == 0, out.stderr
    return f'file://{directory}'


def configure(server, scm_url: str, vault: str, password_file: str):
    env = dict(os.environ, CONTROLLER_HOST=server.url, CONTROLLER_USERNAME=server.admin[0],
               CONTROLLER_PASSWORD=server.admin[1], CONTROLLER_VERIFY_SSL='false', ANSIBLE_NOCOLOR='1',
               ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0')
    out = run([os.path.join(BIN, 'ansible-playbook'), os.path.join(AAP, 'configure.yml'),
               '-e', f'vllm_dr_aap_scm_url={scm_url}', '-e', f'@{vault}', '--vault-password-file', password_file],
              env=env, timeout=1800)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-3000:]
    recap = re.search(r'localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', out.stdout)
    assert recap, out.stdout[-3000:]
    return int(recap.group(2)), out.stdout + out.stderr


def by_name(server, endpoint: str, name: str) -> dict:
    found = server.api('GET', f'/api/v2/{endpoint}/?name={name.replace(" ", "+")}')['results']
    assert len(found) == 1, f'{endpoint}: {name}: {len(found)} found'
    return found[0]


def every_page(server, path: str) -> list:
    results, url = [], path
    while url:
        page = server.api('GET', url)
        results += page['results']
        url = page['next']
    return results


def lab_host_variables(lab, ee_python: str) -> dict:
    """The lab as a host of the inventory, as a site adds it: no secret (the credentials bring them); its modules run
    by the EE's Python (the connection is local: the EE is the host)."""
    host = lab.inventory()['all']['children']['vllm']['hosts']['lab']
    host['vllm_dr_store'].pop('login_password')
    host['vllm_dr_introspection'] = {'url': host['vllm_dr_introspection']['url']}
    host['ansible_python_interpreter'] = ee_python
    host.pop('vllm_dr_sweep_select')  # the survey's answer
    return host


def survey_answers(survey: dict) -> dict:
    """What a user answers: each question's default (the API asks for every required one), or the answer of ANSWERS."""
    answers = {}
    for question in survey['spec']:
        value = ANSWERS.get(question['variable'], question.get('default'))
        answers[question['variable']] = int(value) if question['type'] == 'integer' else value
    return answers


def workflow_nodes(server, workflow_job: int) -> dict:
    nodes = server.api('GET', f'/api/v2/workflow_jobs/{workflow_job}/workflow_nodes/')['results']
    return {node['identifier']: node for node in nodes}


@pytest.mark.timeout(3600)  # AWX's first build: 30 minutes on a busy two-core machine
def test_assets_load_into_awx_and_the_approved_workflow_recovers_the_lab(awx, lab, tmp_path):
    server = awx
    # -- load every asset, twice ---------------------------------------------------------------------------------------
    repo = tmp_path / 'project'
    repo.mkdir()
    scm_url = project_repository(str(repo))
    password_file = tmp_path / 'vault-password'
    password_file.write_text('vault-pass-2b8e61\n')
    vault = tmp_path / 'credentials.vault.yml'
    vault.write_text(yaml.safe_dump({'vllm_dr_aap_credential_inputs': SECRETS}))
    encrypted = run([os.path.join(BIN, 'ansible-vault'), 'encrypt', '--vault-password-file', str(password_file),
                     str(vault)])
    assert encrypted.returncode == 0, encrypted.stderr
    with timed('configure.yml, first run'):
        changed, first_output = configure(server, scm_url, str(vault), str(password_file))
    assert changed > 0
    with timed('configure.yml, second run'):
        changed, second_output = configure(server, scm_url, str(vault), str(password_file))
    assert changed == 0, second_output[-5000:]

    # -- every asset is there, as assets.yml has it ----------------------------------------------------------------------
    for kind in ASSETS['vllm_dr_aap_credential_types']:
        record = by_name(server, 'credential_types', kind['name'])
        assert record['injectors'] == json.loads(json.dumps(kind['injectors']))  # the templates, unrendered
    for credential in ASSETS['vllm_dr_aap_credentials']:
        record = by_name(server, 'credentials', credential['name'])
        assert record['summary_fields']['credential_type']['name'] == credential['credential_type']
    project = by_name(server, 'projects', ASSETS['vllm_dr_aap_project'])
    assert project['status'] == 'successful'
    inventory = by_name(server, 'inventories', ASSETS['vllm_dr_aap_inventory'])
    for template in ASSETS['vllm_dr_aap_job_templates']:
        record = by_name(server, 'job_templates', template['name'])
        assert record['playbook'] == template['playbook'] and record['job_type'] == template['job_type']
        attached = {c['name'] for c in server.api('GET', f'/api/v2/job_templates/{record["id"]}/credentials/')['results']}
        assert attached == set(template['credentials'])
        assert record['survey_enabled'] is (template['survey_spec'] is not None)
        if template['survey_spec'] is not None:
            spec = server.api('GET', f'/api/v2/job_templates/{record["id"]}/survey_spec/')
            assert [q['variable'] for q in spec['spec']] == [q['variable'] for q in template['survey_spec']['spec']]
    workflow = by_name(server, 'workflow_job_templates', ASSETS['vllm_dr_aap_workflow']['name'])
    nodes = {node['identifier']: node for node in
             server.api('GET', f'/api/v2/workflow_job_templates/{workflow["id"]}/workflow_nodes/')['results']}
    ids = {identifier: node['id'] for identifier, node in nodes.items()}
    for node in ASSETS['vllm_dr_aap_workflow']['nodes']:
        record = nodes[node['identifier']]
        for link in ('success_nodes', 'failure_nodes', 'always_nodes'):
            assert sorted(record[link]) == sorted(ids[i] for i in node.get(link, [])), f'{node["identifier"]} {link}'

    # -- the site's host, then the workflow --------------------------------------------------------------------------------
    # in the group the playbooks target by default (vllm_dr_hosts)
    group = server.api('POST', f'/api/v2/inventories/{inventory["id"]}/groups/', {'name': 'vllm'})
    server.api('POST', f'/api/v2/groups/{group["id"]}/hosts/',
               {'name': 'lab', 'inventory': inventory['id'],
                'variables': json.dumps(lab_host_variables(lab, server.ee_python))})
    status, _body = lab.refresh(lab.state['service_session'])
    assert status == 401, 'the lab does not show the incident'
    with timed('workflow: launch to approval'):
        launched = server.api('POST', f'/api/v2/workflow_job_templates/{workflow["id"]}/launch/',
                              {'extra_vars': survey_answers(ASSETS['vllm_dr_aap_workflow']['survey_spec'])})
        job = launched['workflow_job']

        def at_approval():
            found = workflow_nodes(server, job)
            approval = found['approve'].get('summary_fields', {}).get('job')
            return (found, approval) if approval and approval['status'] == 'pending' else None
        found, approval = server.wait_for('the approval node', at_approval, timeout=1800)
    diagnose = server.api('GET', f'/api/v2/jobs/{found["diagnose"]["job"]}/')
    assert diagnose['status'] == 'successful' and diagnose['job_type'] == 'check'
    assert found['restore']['job'] is None, 'the restore ran before the approval'
    assert server.api('GET', f'/api/v2/workflow_jobs/{job}/')['status'] == 'running'
    status, _body = lab.refresh(lab.state['service_session'])
    assert status == 401, 'the diagnose job changed the lab'

    with timed('workflow: approval to the end'):
        server.api('POST', f'/api/v2/workflow_approvals/{approval["id"]}/approve/', {})

        def ended():
            record = server.api('GET', f'/api/v2/workflow_jobs/{job}/')
            return record if record['status'] in ('successful', 'failed', 'error', 'canceled') else None
        finished = server.wait_for('the workflow', ended, timeout=1800)
    found = workflow_nodes(server, job)

    # the callback receiver writes the events (and the artifacts, from the stats event) after the job's status
    def events_written():
        record = server.api('GET', f'/api/v2/jobs/{found["restore"]["job"]}/')
        return record if record['event_processing_finished'] else None
    restore = server.wait_for('the restore job\'s events', events_written, 600)
    assert restore['status'] == 'successful', server.api('GET', f'/api/v2/jobs/{restore["id"]}/stdout/?format=txt')
    assert finished['status'] == 'successful'
    assert found['rollback']['job'] is None

    # -- what reached the playbook, and what AWX keeps -------------------------------------------------------------------
    extra = json.loads(restore['extra_vars'])
    assert extra['vllm_dr_sweep_select'] == 'revoked' and extra['vllm_dr_max_delete'] == 0
    restore_template = next(t for t in ASSETS['vllm_dr_aap_job_templates'] if t['name'] == 'vLLM DR restore')
    assert {c['name'] for c in restore['summary_fields']['credentials']} == set(restore_template['credentials'])
    # the host has no password: only the injected credential opens the lab's Redis and its introspection
    summary = restore['artifacts']['vllm_dr_validation_summary']['lab']
    assert summary['passed'] is True and summary['failed'] == []
    status, _body = lab.refresh(lab.state['service_session'])
    assert status == 200, 'the refresh still fails after the restore job'
    events = every_page(server, f'/api/v2/jobs/{restore["id"]}/job_events/?page_size=200')
    assert any(event['event'] == 'playbook_on_stats' for event in events)
    assert any(event['task'].startswith('Purge') or 'purge' in event['task'].lower() for event in events if event['task'])
    stdout = server.api('GET', f'/api/v2/jobs/{restore["id"]}/stdout/?format=json')['content']
    assert 'PLAY RECAP' in stdout

    secrets = set(SECRET_VALUES) | idp_tokens(lab.path('idp', 'idp.db')) | {server.admin[1], 'vault-pass-2b8e61'}
    texts = {'configure.yml output': first_output + second_output}
    for endpoint in ('credentials', 'credential_types', 'job_templates', 'workflow_job_templates', 'projects',
                     'inventories', 'hosts', 'workflow_jobs', 'workflow_approvals', 'activity_stream'):
        texts[f'/api/v2/{endpoint}/'] = json.dumps(every_page(server, f'/api/v2/{endpoint}/?page_size=200'))
    for unified in every_page(server, '/api/v2/unified_jobs/?page_size=200'):
        if unified['type'] not in ('job', 'project_update'):
            continue
        path = f'/api/v2/{unified["type"]}s/{unified["id"]}'
        texts[path] = json.dumps(server.api('GET', f'{path}/'))
        events_path = f'{path}/job_events/' if unified['type'] == 'job' else f'{path}/events/'
        texts[f'{path}/events'] = json.dumps(every_page(server, f'{events_path}?page_size=200'))
        texts[f'{path}/stdout'] = server.api('GET', f'{path}/stdout/?format=json')['content']
    assert len(texts) > 15
    logs = server.logs()
    assert find_leaks(secrets, dict(texts, **logs)) == []

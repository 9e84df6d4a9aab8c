"""The restore and rollback jobs as AWX runs them: ansible-runner on a private data directory laid out as AWX
lays it, as an unprivileged user, the collection installed where that user cannot write, survey answers and
credential injectors' values as extra vars and environment variables, the rollback fed by the restore job's
artifacts. Run by tools/aap.sh (its virtualenv has ansible-runner and the oldest supported ansible-core).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import jinja2
import pytest
import redis
import yaml

from harness.aap_assets import load_assets
from harness.caches import cache_rows
from harness.reports import report_path
from harness.secret_scan import files_under, find_leaks, idp_tokens
from harness.sessions import dump_redis
from lab.labctl import Lab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
AAP = os.path.join(ROOT, 'extensions', 'aap')
UID = GID = 65534  # nobody: the job's user, as the EE's runner user is not root

# Test secrets, one per credential field that holds one
SECRETS = {
    'store': {'login_password': 'store-pass-7c1f9e2a4b', 'login_user': ''},
    'introspection': {'client_id': 'vllm-dr', 'client_secret': 'vllm-dr-lab-secret'},
    'kubernetes': {'kubeconfig': 'apiVersion: v1\nkind: Config\nusers:\n- name: dr\n  user: {token: k8s-bearer-0d9b7a61f3e24c85}\n',
                   'context': ''},
}
# The survey answers: the defaults, except the sweep (the lab's tokens were rotated, not expired)
ANSWERS = {'vllm_dr_sweep_select': 'revoked'}


def as_job_user():
    os.setgroups([])
    os.setgid(GID)
    os.setuid(UID)


def run_as_job_user(command, **kwargs):
    return subprocess.run(command, preexec_fn=as_job_user, capture_output=True, text=True, check=False, **kwargs)


def assets():
    return load_assets()


def render_injectors(credential_type: dict, inputs: dict, private_dir: str) -> tuple:
    """(extra vars, environment) of a credential, as AWX renders its type's injectors: file templates are
    written to files in the private data directory and named by tower.filename.<name>."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    fields = {field['id']: inputs.get(field['id'], '' if field.get('type') == 'string' else False)
              for field in credential_type['inputs']['fields']}
    injectors = credential_type['injectors']
    filenames = {}
    for key, template in injectors.get('file', {}).items():
        handle, path = tempfile.mkstemp(dir=os.path.join(private_dir, 'env'))
        with os.fdopen(handle, 'w') as out:
            out.write(env.from_string(template).render(**fields))
        os.chmod(path, 0o600)
        os.chown(path, UID, GID)
        filenames[key.split('.', 1)[1]] = path
    context = dict(fields, tower={'filename': filenames})
    render = {name: env.from_string(value).render(**context) for name, value in injectors.get('extra_vars', {}).items()}
    environ = {name: env.from_string(value).render(**context) for name, value in injectors.get('env', {}).items()}
    return render, environ


def survey_answers(survey: dict) -> dict:
    """The extra vars a survey launches with: each question's default, or the answer given here, typed as AWX types it."""
    answers = {}
    for question in survey['spec']:
        value = ANSWERS.get(question['variable'], question.get('default'))
        answers[question['variable']] = int(value) if question['type'] == 'integer' else value
    return answers


def chown_tree(path: str) -> None:
    for directory, dirs, files in os.walk(path):
        for name in [directory] + [os.path.join(directory, n) for n in dirs + files]:
            os.lchown(name, UID, GID)


@pytest.fixture(scope='module')
def awx(tmp_path_factory):
    """The lab (its servers run as the job's user, as a target host's service would be managed by it), the
    collection installed read-only, and a function that runs a job template's playbook as AWX would."""
    base = tempfile.mkdtemp(prefix='vllm-dr-awx-')
    os.chmod(base, 0o755)
    work = tmp_path_factory.mktemp('awx')
    # the collection, as the EE has it: installed by root, read-only for the job's user
    build = run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'build', '--force', '--output-path', str(work), ROOT])
    assert build.returncode == 0, build.stderr
    collections = os.path.join(base, 'collections')
    installed = run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', '--offline', '--no-deps', '--force',
                     '-p', collections, glob.glob(str(work / '*.tar.gz'))[0]])
    assert installed.returncode == 0, installed.stderr
    for directory, _dirs, files in os.walk(collections):
        os.chmod(directory, 0o555)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o444)
    listed = run_as_job_user([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'list', '-p', collections],
                             env={'HOME': '/tmp', 'PATH': f'{BIN}:/usr/bin:/bin'})
    assert 'inferops.vllm_dr' in listed.stdout, listed.stdout + listed.stderr
    lab_dir = os.path.join(base, 'lab')
    os.mkdir(lab_dir)
    os.chown(lab_dir, UID, GID)
    labctl = [sys.executable, os.path.join(ROOT, 'tests', 'lab', 'labctl.py'), '--state', lab_dir]
    up = run_as_job_user(labctl + ['up', '--sessions', '3', '--redis-password', SECRETS['store']['login_password']])
    assert up.returncode == 0, up.stderr
    home = os.path.join(base, 'home')
    os.mkdir(home)
    os.chown(home, UID, GID)
    try:
        for step in ('snapshot', 'rotate', 'restore'):
            out = run_as_job_user(labctl + [step])
            assert out.returncode == 0, out.stderr
        lab = Lab(lab_dir)

        def job(ident: str, playbook: str, extravars: dict, credentials: list) -> dict:
            private = os.path.join(base, ident)
            for sub in ('project', 'inventory', 'env'):
                os.makedirs(os.path.join(private, sub))
            for name in os.listdir(os.path.join(AAP, 'project')):
                shutil.copy(os.path.join(AAP, 'project', name), os.path.join(private, 'project', name))
            # the inventory AWX syncs: the lab's, without the secrets (they come from credentials) and without a
            # report directory (the default must be a writable place)
            host = lab.inventory()['all']['children']['vllm']['hosts']['lab']
            del host['vllm_dr_report_dir']
            host['vllm_dr_store'].pop('login_password')
            host['vllm_dr_introspection'] = {'url': host['vllm_dr_introspection']['url']}
            with open(os.path.join(private, 'inventory', 'hosts.yml'), 'w', encoding='utf-8') as handle:
                yaml.safe_dump({'all': {'children': {'vllm': {'hosts': {'lab': host}}}}}, handle)
            types = {kind['name']: kind for kind in assets()['vllm_dr_aap_credential_types']}
            variables, environ = dict(extravars), {}
            for name, inputs in credentials:
                injected_vars, injected_env = render_injectors(types[name], inputs, private)
                variables.update(injected_vars)
                environ.update(injected_env)
            with open(os.path.join(private, 'env', 'extravars'), 'w', encoding='utf-8') as handle:
                yaml.safe_dump(variables, handle)
            with open(os.path.join(private, 'env', 'envvars'), 'w', encoding='utf-8') as handle:
                yaml.safe_dump(environ, handle)
            chown_tree(private)
            for name in ('extravars', 'envvars'):
                os.chmod(os.path.join(private, 'env', name), 0o600)
            env = {'PATH': f'{BIN}:/usr/bin:/bin', 'HOME': home, 'LANG': 'C.UTF-8',
                   # the EE's collection path: root's, read-only
                   'ANSIBLE_COLLECTIONS_PATH': collections,
                   # the EE gives its user a passwd entry with HOME=/runner; nobody's says /nonexistent, which
                   # the shell's ~ (ansible's remote tmp on this machine) would use
                   'ANSIBLE_REMOTE_TMP': os.path.join(home, '.ansible', 'tmp')}
            out = run_as_job_user([os.path.join(BIN, 'ansible-runner'), 'run', private, '-p', playbook,
                                   '--ident', ident], env=env, timeout=900)
            artifacts = os.path.join(private, 'artifacts', ident)
            events = []
            for path in sorted(glob.glob(os.path.join(artifacts, 'job_events', '*.json'))):
                with open(path, encoding='utf-8') as handle:
                    events.append(json.load(handle))
            stats = [event for event in events if event.get('event') == 'playbook_on_stats']
            with open(os.path.join(artifacts, 'status'), encoding='utf-8') as handle:
                status = handle.read().strip()
            return {'rc': out.returncode, 'status': status, 'artifacts': artifacts, 'stdout': out.stdout,
                    'artifact_data': stats[0]['event_data'].get('artifact_data', {}) if stats else None}

        yield {'lab': lab, 'job': job, 'home': home, 'collections': collections, 'base': base}
    finally:
        run_as_job_user(labctl + ['down'])
        Lab(lab_dir).down()
        for directory, _dirs, _files in os.walk(collections):
            os.chmod(directory, 0o755)
        shutil.rmtree(base, ignore_errors=True)


def run(command):
    return subprocess.run(command, capture_output=True, text=True, check=False)


def store(lab):
    return redis.Redis(host='127.0.0.1', port=lab.state['ports']['redis'], password=lab.state['redis_password'],
                       socket_timeout=5)


def credentials(*names):
    kinds = {'vLLM DR session store': 'store', 'vLLM DR introspection client': 'introspection',
             'vLLM DR Kubernetes kubeconfig': 'kubernetes'}
    return [(name, SECRETS[kinds[name]]) for name in names]


def test_restore_then_rollback_jobs_run_unprivileged_with_a_read_only_collection(awx):
    lab = awx['lab']
    # the premises: the job's user cannot write the collection, and is not root
    probe = run_as_job_user(['sh', '-c', f'id -u; touch {awx["collections"]}/ansible_collections/x'])
    assert probe.stdout.split()[0] != '0' and probe.returncode != 0
    before = {'store': dump_redis(store(lab)), 'cache': cache_rows(lab.cache_path)}
    survey = assets()['vllm_dr_aap_surveys']['restore']
    every_credential = credentials('vLLM DR session store', 'vLLM DR introspection client',
                                   'vLLM DR Kubernetes kubeconfig')

    restore = awx['job']('restore', 'vllm_dr_restore.yml', survey_answers(survey), every_credential)
    assert restore['rc'] == 0 and restore['status'] == 'successful', restore['stdout'][-3000:]
    data = restore['artifact_data']
    assert set(data['vllm_dr_validation_summary']) == {'lab'}
    assert data['vllm_dr_validation_summary']['lab']['passed'] is True
    assert data['vllm_dr_validation_summary']['lab']['failed'] == []
    rollback_dir = data['vllm_dr_rollback_dirs']['lab']
    assert os.path.isfile(os.path.join(rollback_dir, 'sessions.jsonl'))
    # the report went to the job user's own place, not into the collection
    reports = os.path.join(awx['home'], '.local', 'state', 'vllm_dr', 'reports')
    with open(report_path(reports, 'lab.json'), encoding='utf-8') as handle:
        report = json.load(handle)
    assert report['passed'] is True and report['purge']['backup_dir'] == rollback_dir
    assert not os.path.exists(lab.cache_path) or cache_rows(lab.cache_path) != before['cache']

    # the workflow's rollback node: the restore job's artifacts are its extra vars
    rollback = awx['job']('rollback', 'vllm_dr_rollback.yml', data, credentials('vLLM DR session store'))
    assert rollback['rc'] == 0 and rollback['status'] == 'successful', rollback['stdout'][-3000:]
    # the cache rows the restore removed are back; the row the restarted service wrote since (its own) is kept
    cached, own = cache_rows(lab.cache_path), lab.state['service_session']
    assert {k: v for k, v in cached.items() if k != own} == {k: v for k, v in before['cache'].items() if k != own}
    after = dump_redis(store(lab))
    service = f'vllm:session:{own}'.encode()
    assert {k: v for k, v in after.items() if k != service} == {k: v for k, v in before['store'].items() if k != service}

    # a restore that stops before its first change (a vllm_dr_http key it does not know) still publishes its verdict
    stopped = awx['job']('stopped', 'vllm_dr_restore.yml', dict(survey_answers(survey), vllm_dr_http={'cacert': 'x'}),
                         every_credential)
    assert stopped['rc'] != 0 and stopped['status'] == 'failed', stopped['stdout'][-3000:]
    summary = stopped['artifact_data']['vllm_dr_validation_summary']['lab']
    assert summary['outcome'] == 'stopped' and summary['passed'] is False, summary
    assert 'vllm_dr_http.cacert' in summary['reason'], summary
    assert dump_redis(store(lab)) == after

    # no secret in what AWX shows and keeps: stdout, the job events, the reports
    secrets = {value for group in SECRETS.values() for value in group.values() if isinstance(value, str)}
    secrets.add('k8s-bearer-0d9b7a61f3e24c85')  # inside the kubeconfig
    secrets |= idp_tokens(lab.path('idp', 'idp.db'))  # every access and refresh token of the run
    outputs = [path for ident in ('restore', 'rollback', 'stopped')
               for path in [os.path.join(awx['base'], ident, 'artifacts', ident, 'stdout')]
               + glob.glob(os.path.join(awx['base'], ident, 'artifacts', ident, 'job_events', '*.json'))]
    # every report, the fleet report's directory included
    outputs += list(files_under(reports))
    assert len(outputs) > 20
    assert find_leaks(secrets, {'restore stdout': restore['stdout'], 'rollback stdout': rollback['stdout'],
                                'stopped stdout': stopped['stdout']}, outputs) == []

"""The CI recipes of extensions/ci/, every command run in order against the incident lab: three outcomes.

The job's checkout is a clean `git clone` of this repository's HEAD, with the target's inventory added: the recipe
builds the collection's tarball from it and installs that, with no Galaxy to reach (its server and any proxy point at
a closed port). The lab stands in for the target: its inventory is the file the recipe names, its secrets reach the
playbook only through the environment the CI would set from its secret store. The Python the CI image or
setup-python gives is the project's virtualenv's, with no package index: the recipe's pip install must find its pins
there (the same as tests/requirements.txt's), and installs nothing else.
"""

from __future__ import annotations

import glob
import os
import re
import socket
import subprocess
import sys
from xml.etree import ElementTree

import pytest
import yaml

from harness.ci_recipes import run_github_job, run_gitlab_job
from harness.reports import report_path
from harness.servers import free_port
from lab.labctl import Lab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GITHUB = os.path.join(ROOT, 'extensions', 'ci', 'github', 'vllm-dr-drill.yml')
GITLAB = os.path.join(ROOT, 'extensions', 'ci', 'gitlab', 'vllm-dr-drill.gitlab-ci.yml')
INSTALL_STEP = 'Install Ansible and the collection'
DRILL_STEP = 'Run the drill'
STORE_PASSWORD = 'ci-store-password-7c1f'
SECRETS = {'VLLM_DR_STORE_PASSWORD': STORE_PASSWORD, 'VLLM_DR_INTROSPECTION_CLIENT_SECRET': 'vllm-dr-lab-secret'}


@pytest.fixture
def lab(tmp_path):
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=2, redis_password=STORE_PASSWORD)
    try:
        yield lab
    finally:
        lab.down()


def checkout(lab, workspace, outcome: str) -> str:
    """The repository a CI job checks out: the target's inventory, secrets read from the environment."""
    host = lab.inventory()['all']['children']['vllm']['hosts']['lab']
    host['vllm_dr_store']['login_password'] = "{{ lookup('ansible.builtin.env', 'VLLM_DR_STORE_PASSWORD') }}"
    host['vllm_dr_introspection']['client_secret'] = "{{ lookup('ansible.builtin.env', 'VLLM_DR_INTROSPECTION_CLIENT_SECRET') }}"
    del host['vllm_dr_report_dir']  # the recipe says where reports go
    if outcome == 'validation_fails':
        # sweeping only expired sessions cannot help: the snapshot's tokens were revoked, not expired
        host['vllm_dr_sweep_select'] = 'expired'
    elif outcome == 'store_unreachable':
        host['vllm_dr_store']['login_port'] = free_port()
    # the repository the job checks out: the collection's own, at HEAD, with nothing a local run left behind
    subprocess.run(['git', 'clone', '--quiet', '--no-hardlinks', ROOT, str(workspace)], check=True, timeout=300)
    inventory = workspace / 'inventory' / 'vllm_dr.yml'
    inventory.parent.mkdir(parents=True)
    inventory.write_text(yaml.safe_dump({'all': {'children': {'vllm': {'hosts': {'lab': host}}}}}))
    return inventory.read_text()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def base_env(tmp_path) -> dict:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(('ANSIBLE_', 'JUNIT_', 'VLLM_DR_', 'PIP_'))
           and key.lower() not in ('http_proxy', 'https_proxy', 'all_proxy', 'no_proxy')}
    env['PATH'] = os.path.dirname(sys.executable) + os.pathsep + env.get('PATH', '')
    nowhere = f'http://127.0.0.1:{closed_port()}'
    # no Galaxy and no package index: what the job installs comes from its checkout and the Python it was given;
    # only loopback (the lab, standing in for the target) is reached directly, anything else through a closed port
    env.update(HOME=str(tmp_path / 'home'), ANSIBLE_GALAXY_SERVER=nowhere, http_proxy=nowhere, https_proxy=nowhere,
               HTTP_PROXY=nowhere, HTTPS_PROXY=nowhere, no_proxy='127.0.0.1,localhost', NO_PROXY='127.0.0.1,localhost',
               PIP_NO_INDEX='1', PIP_DISABLE_PIP_VERSION_CHECK='1')
    return env


def installed_from_the_checkout(workspace, install_step):
    """The install step ran and left the collection built from the checkout, a copy, not a link to this one."""
    assert install_step.status == 'passed', install_step.output[-3000:]
    installed = workspace / 'collections' / 'ansible_collections' / 'inferops' / 'vllm_dr'
    assert (installed / 'MANIFEST.json').is_file() and not installed.is_symlink()
    assert glob.glob(str(workspace / 'build' / 'vllm_dr' / 'inferops-vllm_dr-*.tar.gz'))


def run_recipe(recipe: str, workspace) -> tuple:
    """(job run, exit code of ansible-playbook, text a reader of the job sees besides the files)."""
    env = base_env(workspace.parent)
    if recipe == 'github':
        job = run_github_job(GITHUB, 'restore-drill', workspace=str(workspace), base_env=env, secrets=SECRETS)
        installed_from_the_checkout(workspace, job.step(INSTALL_STEP))
        summary = (workspace / 'step-summary.md').read_text()
        return job, job.step(DRILL_STEP).exit_code, summary
    job = run_gitlab_job(GITLAB, 'vllm-dr-drill', project_dir=str(workspace), base_env=env, variables=SECRETS)
    installed_from_the_checkout(workspace, job.step('before_script'))
    return job, job.step('script').exit_code, job.step('after_script').output


def drill(recipe: str, lab, tmp_path, outcome: str) -> tuple:
    """The recipe run on a checkout for this outcome: (workspace, job run, drill exit code, text shown).
    Whatever the outcome, no secret is in the checkout, the job's output or any report."""
    workspace = tmp_path / 'workspace'
    inventory_text = checkout(lab, workspace, outcome)
    job, drill_exit, shown = run_recipe(recipe, workspace)
    assert all(secret not in inventory_text for secret in SECRETS.values()), 'secrets come from the environment'
    assert all(secret not in job.output for secret in SECRETS.values())
    for path in glob.glob(str(workspace / 'reports' / '**' / '*'), recursive=True) + [str(workspace / 'step-summary.md')]:
        if os.path.isfile(path):
            text = open(path, encoding='utf-8').read()
            assert all(secret not in text for secret in SECRETS.values()), path
    return workspace, job, drill_exit, shown


def runbook_junit(workspace) -> ElementTree.Element:
    return ElementTree.parse(report_path(workspace / 'reports' / 'vllm_dr', 'lab.junit.xml')).getroot().find('testsuite')


def callback_junit(workspace) -> list:
    files = glob.glob(str(workspace / 'reports' / 'ansible' / '*.xml'))
    assert files, 'the junit callback wrote no report'
    return [ElementTree.parse(path).getroot() for path in files]


def failures(suite) -> dict:
    return {case.get('name'): case.find('failure').get('message') for case in suite.iter('testcase')
            if case.find('failure') is not None}


@pytest.mark.slow
@pytest.mark.parametrize('recipe', ['github', 'gitlab'])
def test_ci_recipe_recovery_works_exit_zero_and_every_check_passes(recipe, lab, tmp_path):
    workspace, job, drill_exit, shown = drill(recipe, lab, tmp_path, 'recovered')
    assert drill_exit == 0 and job.exit_code == 0, job.output[-3000:]
    suite = runbook_junit(workspace)
    assert suite.get('tests') == '4' and suite.get('failures') == '0' and failures(suite) == {}
    assert all(root.get('failures') == '0' and root.get('errors') == '0' for root in callback_junit(workspace))
    assert '# vLLM token recovery on lab: PASSED' in shown
    assert lab.refresh('svc')[0] == 200


@pytest.mark.slow
@pytest.mark.parametrize('recipe', ['github', 'gitlab'])
def test_ci_recipe_validation_fails_exit_non_zero_and_junit_names_the_check(recipe, lab, tmp_path):
    workspace, job, drill_exit, shown = drill(recipe, lab, tmp_path, 'validation_fails')
    assert drill_exit == 2 and job.exit_code == 1, job.output[-3000:]
    assert 'refresh probe is healthy' in failures(runbook_junit(workspace))
    callback_junit(workspace)
    assert '# vLLM token recovery on lab: FAILED' in shown and '| refresh probe is healthy | FAIL |' in shown


@pytest.mark.slow
@pytest.mark.parametrize('recipe', ['github', 'gitlab'])
def test_ci_recipe_store_unreachable_exit_non_zero_and_junit_names_the_failed_step(recipe, lab, tmp_path):
    workspace, job, drill_exit, shown = drill(recipe, lab, tmp_path, 'store_unreachable')
    assert drill_exit == 2 and job.exit_code == 1, job.output[-3000:]
    failed = failures(runbook_junit(workspace))
    assert list(failed) == ['the runbook reached validation']
    assert "failed at step 'Report the sessions the sweep would remove': cannot reach Redis" in failed['the runbook reached validation']
    assert any('Report the sessions the sweep would remove' in ElementTree.tostring(root, encoding='unicode')
               for root in callback_junit(workspace))
    assert '# vLLM token recovery on lab: FAILED' in shown


ACTION = re.compile(r'^\s*(?:-\s+)?uses:\s*(\S+?)@(\S+)(.*)$')


def test_every_action_of_the_github_recipe_is_pinned_by_commit_with_its_version_named():
    with open(GITHUB, encoding='utf-8') as handle:
        lines = [line for line in handle if re.match(r'^\s*(-\s+)?uses:', line)]
    assert len(lines) == 4
    for line in lines:
        name, ref, rest = ACTION.match(line).groups()
        assert re.fullmatch(r'[0-9a-f]{40}', ref), f'{name} is pinned by {ref}, not by a commit'
        assert re.fullmatch(r'\s+# v\d+\.\d+\.\d+\s*', rest), f'{name}@{ref}: no "# vX.Y.Z" comment'


@pytest.mark.parametrize('recipe', [GITHUB, GITLAB])
def test_no_recipe_installs_from_galaxy_by_name(recipe):
    with open(recipe, encoding='utf-8') as handle:
        text = handle.read()
    assert not re.search(r'collection install[^\n]*inferops\.vllm_dr\b', text)
    assert 'ansible-galaxy collection build' in text

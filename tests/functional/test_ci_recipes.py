"""The CI recipes of extensions/ci/, their commands run in order against the incident lab: three outcomes.

The lab stands in for the target: its inventory is the file the recipe names, its secrets reach the playbook only
through the environment the CI would set from its secret store. The installation step is done by the test machine
(the collection linked where the recipe's ANSIBLE_COLLECTIONS_PATH points, the venv's ansible-playbook on PATH).
"""

from __future__ import annotations

import glob
import os
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
    inventory = workspace / 'inventory' / 'vllm_dr.yml'
    inventory.parent.mkdir(parents=True)
    inventory.write_text(yaml.safe_dump({'all': {'children': {'vllm': {'hosts': {'lab': host}}}}}))
    # what the installation step leaves: the collection under ANSIBLE_COLLECTIONS_PATH
    collection = workspace / 'collections' / 'ansible_collections' / 'inferops'
    collection.mkdir(parents=True)
    (collection / 'vllm_dr').symlink_to(ROOT)
    return inventory.read_text()


def base_env() -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith(('ANSIBLE_', 'JUNIT_', 'VLLM_DR_'))}
    env['PATH'] = os.path.dirname(sys.executable) + os.pathsep + env.get('PATH', '')
    return env


def run_recipe(recipe: str, workspace) -> tuple:
    """(job run, exit code of ansible-playbook, text a reader of the job sees besides the files)."""
    if recipe == 'github':
        job = run_github_job(GITHUB, 'restore-drill', workspace=str(workspace), base_env=base_env(),
                             secrets=SECRETS, skip=(INSTALL_STEP,))
        assert job.step(INSTALL_STEP).status == 'not run here'
        summary = (workspace / 'step-summary.md').read_text()
        return job, job.step(DRILL_STEP).exit_code, summary
    job = run_gitlab_job(GITLAB, 'vllm-dr-drill', project_dir=str(workspace), base_env=base_env(),
                         variables=SECRETS, skip=('before_script',))
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

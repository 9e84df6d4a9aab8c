"""extensions/aap against the roles: every survey variable is a role or playbook variable whose argument spec accepts
the question's type, choices and default; every variable a credential type injects is read by the roles (extra
vars) or by kubernetes.core (environment); every injector template is !unsafe; every credential a job template names
is one configure.yml creates; the playbooks pass ansible-playbook --syntax-check. tests/aap/test_awx_api.py loads them
into the real AWX and runs the workflow.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from harness.aap_assets import Unsafe, leaves, load_assets

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
AAP = os.path.join(ROOT, 'extensions', 'aap')
ROLES = ('restore', 'purge', 'validate')


def load(*parts):
    with open(os.path.join(*parts), encoding='utf-8') as handle:
        return yaml.safe_load(handle)


ASSETS = load_assets()
SPECS = {role: load(ROOT, 'roles', role, 'meta', 'argument_specs.yml')['argument_specs']['main']['options']
         for role in ROLES}
QUESTIONS = [(name, question) for name, survey in ASSETS['vllm_dr_aap_surveys'].items() for question in survey['spec']]
# What a survey answer arrives as (AWX's survey types), and which argument spec types take it
SURVEY_TYPES = {'text': ('str',), 'textarea': ('str',), 'password': ('str',), 'integer': ('int',),
                'float': ('float',), 'multiplechoice': ('str', 'bool'), 'multiselect': ('list',)}


def playbook_variables():
    """vllm_dr_* variables the collection's playbooks read."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, 'playbooks', '*.yml')):
        with open(path, encoding='utf-8') as handle:
            names |= set(re.findall(r'\b(vllm_dr_[a-z0-9_]+)', handle.read()))
    return names


def run(command, **kwargs):
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0')
    return subprocess.run(command, capture_output=True, text=True, check=False, env=env, **kwargs)


@pytest.mark.parametrize('survey,question', QUESTIONS, ids=[f'{s}:{q["variable"]}' for s, q in QUESTIONS])
def test_survey_question_is_a_role_variable_its_spec_accepts(survey, question):
    variable = question['variable']
    specs = {role: SPECS[role][variable] for role in ROLES if variable in SPECS[role]}
    assert specs or variable in playbook_variables(), f'{survey}: {variable} is read by no role and no playbook'
    values = [question.get('default')] + list(question.get('choices') or [])
    if question['type'] == 'integer':
        values = [int(value) for value in values] + [question['min'], question['max']]
    for role, spec in specs.items():
        assert spec.get('type', 'str') in SURVEY_TYPES[question['type']], f'{role}: {variable} is {spec.get("type")}'
        if spec.get('choices'):
            # every answer the survey offers is one the role takes (the survey may offer fewer)
            assert question['type'] == 'multiplechoice', f'{role}: {variable} has choices, the question has none'
        for value in values:
            result = ArgumentSpecValidator({variable: spec}).validate({variable: value})
            assert not result.error_messages, f'{role} refuses {variable}={value!r}: {result.error_messages}'
        if spec.get('choices') and question['type'] == 'multiplechoice':
            assert set(question['choices']) <= set(map(str, spec['choices']))
    # AWX checks a default against the question's own choices and bounds
    if question['type'] == 'multiplechoice':
        assert question['default'] in question['choices']
    if question['type'] == 'integer':
        assert question['min'] <= int(question['default']) <= question['max']


def test_every_job_template_names_a_known_survey_and_a_shipped_playbook():
    surveys = list(ASSETS['vllm_dr_aap_surveys'].values())
    for template in ASSETS['vllm_dr_aap_job_templates']:
        # survey_spec (infra.aap_configuration's name; its alias `survey` means the same key there)
        assert 'survey' not in template, f'{template["name"]}: survey is an alias of survey_spec; name it survey_spec'
        assert template['survey_spec'] is None or template['survey_spec'] in surveys, template['name']
        assert os.path.isfile(os.path.join(AAP, 'project', template['playbook'])), template['playbook']


def test_every_credential_a_job_template_names_is_one_configure_creates():
    created = {credential['name']: credential for credential in ASSETS.get('vllm_dr_aap_credentials', [])}
    kinds = {kind['name'] for kind in ASSETS['vllm_dr_aap_credential_types']}
    for credential in created.values():
        assert credential['credential_type'] in kinds, f'{credential["name"]}: no such credential type'
    for template in ASSETS['vllm_dr_aap_job_templates']:
        for name in template['credentials']:
            assert name in created, f'{template["name"]} names the credential "{name}", which nothing creates'
            assert not created[name].get('optional'), f'{template["name"]} needs "{name}", which may be skipped'


def test_every_injector_template_is_unsafe_so_that_awx_renders_it():
    """Ansible renders any other string of the vars file itself (and fails: the fields are AWX's, not the play's)."""
    found = 0
    for kind in ASSETS['vllm_dr_aap_credential_types']:
        for path, value in leaves(kind['injectors']):
            found += 1
            assert isinstance(value, Unsafe), f'{kind["name"]}: injector {".".join(map(str, path))} is not !unsafe'
    assert found


def test_workflow_nodes_are_data_and_link_only_to_nodes_there():
    nodes = ASSETS['vllm_dr_aap_workflow']['nodes']
    identifiers = {node['identifier'] for node in nodes}
    templates = {template['name'] for template in ASSETS['vllm_dr_aap_job_templates']}
    assert len(identifiers) == len(nodes)
    for node in nodes:
        assert ('unified_job_template' in node) != ('approval_node' in node), node['identifier']
        assert node.get('unified_job_template', next(iter(templates))) in templates, node['identifier']
        for link in ('success_nodes', 'failure_nodes', 'always_nodes'):
            assert set(node.get(link, [])) <= identifiers, f'{node["identifier"]}: {link}'
    assert any('approval_node' in node for node in nodes)


def injected(kind):
    return kind['injectors'].get('extra_vars', {}), kind['injectors'].get('env', {})


def test_every_injected_extra_var_is_read_by_every_role_that_takes_its_dict(tmp_path):
    """The roles' effective store and introspection options, with every injected variable set: each must arrive."""
    extra = {}
    for kind in ASSETS['vllm_dr_aap_credential_types']:
        for name in injected(kind)[0]:
            extra[name] = f'value-of-{name}'
    assert extra, 'no credential type injects extra vars'
    plays = []
    for role in ROLES:
        plays.append({'name': role, 'hosts': 'localhost', 'gather_facts': False,
                      'roles': [{'role': f'inferops.vllm_dr.{role}', 'tags': ['never']}],
                      'tasks': [{'name': 'effective', 'ansible.builtin.debug': {
                          'msg': "{{ {'role': '%s', 'store': _vllm_dr_store, "
                                 "'introspection': _vllm_dr_introspection | default(none)} | to_json }}" % role}}]})
    playbook = tmp_path / 'effective.yml'
    playbook.write_text(yaml.safe_dump(plays))
    (tmp_path / 'extra.json').write_text(json.dumps(extra))
    out = run([os.path.join(BIN, 'ansible-playbook'), '-i', 'localhost,', '-c', 'local', str(playbook),
               '-e', f'@{tmp_path / "extra.json"}'])
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    seen = {}
    for line in re.findall(r'"msg": "(.*)"', out.stdout):
        effective = json.loads(line.encode().decode('unicode_escape'))
        seen[effective['role']] = effective
    assert set(seen) == set(ROLES)
    fragment = run([os.path.join(BIN, 'ansible-doc'), '--json', 'inferops.vllm_dr.vllm_session_sweep'])
    options = json.loads(fragment.stdout)['inferops.vllm_dr.vllm_session_sweep']['doc']['options']
    for name, value in extra.items():
        prefix, option = re.match(r'^vllm_dr_(store|introspection)_(.+)$', name).groups()
        readers = [role for role in ROLES if seen[role][prefix] and seen[role][prefix].get(option) == value]
        assert readers, f'{name} is read by no role'
        if prefix == 'store':
            assert readers == list(ROLES), f'{name} reaches only {readers}'
            # and it is an option of the session-store modules
            assert option in options, f'{name}: {option} is no option of the session store'


def test_every_injected_environment_variable_is_read_by_kubernetes_core():
    """The roles reach Kubernetes with kubernetes.core's modules and its kubectl connection: both must read it."""
    connection = json.loads(run([os.path.join(BIN, 'ansible-doc'), '-t', 'connection', '--json',
                                 'kubernetes.core.kubectl']).stdout)['kubernetes.core.kubectl']['doc']['options']
    by_connection = {entry['name'] for option in connection.values() for entry in option.get('env', [])}
    module = run([os.path.join(BIN, 'ansible-doc'), '--json', 'kubernetes.core.k8s_info']).stdout
    names = [name for kind in ASSETS['vllm_dr_aap_credential_types'] for name in injected(kind)[1]]
    assert names
    for name in names:
        assert name in by_connection, f'{name} is not read by the kubectl connection'
        assert f'{name} environment variable' in module, f'{name} is not read by the kubernetes.core modules'


PLAYBOOKS = sorted(path for path in glob.glob(os.path.join(AAP, '*.yml')) + glob.glob(os.path.join(AAP, 'project', '*.yml'))
                   if os.path.basename(path) != 'assets.yml')


@pytest.mark.parametrize('playbook', PLAYBOOKS, ids=os.path.basename)
def test_playbook_syntax(playbook):
    out = run([os.path.join(BIN, 'ansible-playbook'), '--syntax-check', '-i', 'localhost,', playbook])
    assert out.returncode == 0, out.stderr[-2000:]

"""The merged_options lookup as a playbook calls it, and its old name flat_vars, kept as a deprecated redirect."""

from __future__ import annotations

import json
import os
import subprocess
import sys

BIN = os.path.dirname(sys.executable)


def lookup(tmp_path, name: str) -> subprocess.CompletedProcess:
    play = tmp_path / 'play.yml'
    play.write_text(f"""
- hosts: localhost
  gather_facts: false
  vars:
    vllm_dr_store: {{backend: redis, login_port: 6379, login_user: from-inventory}}
    vllm_dr_store_login_user: from-credential
    vllm_dr_store_db: ''
  tasks:
    - ansible.builtin.debug:
        msg: "{{{{ lookup('{name}', 'vllm_dr_store') }}}}"
""")
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_DEPRECATION_WARNINGS='1',
               ANSIBLE_STDOUT_CALLBACK='ansible.builtin.json')
    return subprocess.run([os.path.join(BIN, 'ansible-playbook'), '-i', 'localhost,', '-c', 'local', str(play)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)


def merged(out: subprocess.CompletedProcess) -> dict:
    return json.loads(out.stdout)['plays'][0]['tasks'][0]['hosts']['localhost']['msg']


def test_merged_options_lays_each_flat_variable_over_its_key(tmp_path):
    out = lookup(tmp_path, 'inferops.vllm_dr.merged_options')
    assert out.returncode == 0, out.stdout + out.stderr
    assert merged(out) == {'backend': 'redis', 'login_port': 6379, 'login_user': 'from-credential'}


def test_the_old_name_flat_vars_still_works_and_says_it_is_deprecated(tmp_path):
    out = lookup(tmp_path, 'inferops.vllm_dr.flat_vars')
    assert out.returncode == 0, out.stdout + out.stderr
    assert merged(out) == {'backend': 'redis', 'login_port': 6379, 'login_user': 'from-credential'}
    assert 'inferops.vllm_dr.merged_options' in out.stdout + out.stderr and 'deprecated' in out.stdout + out.stderr

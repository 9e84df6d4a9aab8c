"""The filters a user may write are the documented ones ansible-doc lists; the filters only the collection's roles and
playbooks call are private (plugins/filter/__internal.py, named _<name>): they load by their full names, as the roles
call them, and ansible-doc neither lists nor documents them."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from ansible_collections.inferops.vllm_dr.plugins.filter import __internal as private  # pylint: disable=no-name-in-module

ROOT = pathlib.Path(__file__).resolve().parents[4]
PREFIX = 'inferops.vllm_dr.'
CALL = re.compile(r'\|\s*inferops\.vllm_dr\.(\w+)')
PRIVATE = sorted(private.FilterModule().filters())


def ansible(tool, *args):
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), tool), *args],
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope='module')
def listed():
    out = ansible('ansible-doc', '-t', 'filter', '-l', '--json', 'inferops.vllm_dr')
    assert out.returncode == 0, out.stderr
    return {name[len(PREFIX):]: summary for name, summary in json.loads(out.stdout).items()}


def calls():
    found = {}
    for top in ('roles', 'playbooks'):
        for path in sorted((ROOT / top).rglob('*')):
            if path.suffix in ('.yml', '.yaml', '.j2') and path.is_file():
                for name in CALL.findall(path.read_text(encoding='utf-8')):
                    found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_private_filters_are_named_private():
    assert len(PRIVATE) >= 8
    assert [name for name in PRIVATE if not name.startswith('_')] == []


def test_ansible_doc_lists_only_documented_public_filters(listed):
    assert 'log_evidence' in listed
    assert [name for name in listed if name.startswith('_') or name in PRIVATE] == []
    assert [name for name, summary in listed.items() if summary == 'UNDOCUMENTED'] == []


def test_every_filter_the_roles_call_exists(listed):
    called = calls()
    assert '_store_sweeper' in called and '_fleet_report' in called
    assert {name: where for name, where in called.items() if name not in listed and name not in PRIVATE} == {}


def test_every_private_filter_is_called():
    called = calls()  # under its name, or the Kubernetes task files' name of it (without the _) until they change
    assert [name for name in PRIVATE if not {name, name[1:]} & set(called)] == []


def test_a_private_filter_loads_by_its_full_name(tmp_path):
    playbook = tmp_path / 'private.yml'
    playbook.write_text(
        '- hosts: localhost\n  gather_facts: false\n  tasks:\n'
        '    - ansible.builtin.debug:\n'
        "        msg: \"sweeper={{ ['a', 'b', 'c'] | inferops.vllm_dr._store_sweeper(hostvars_like, 'c') }}\"\n"
        '      vars:\n        hostvars_like:\n          a: {}\n'
        '          b: {_vllm_dr_sweep_store: {login_host: redis.example, login_port: 6379}}\n'
        '          c: {_vllm_dr_sweep_store: {login_host: redis.example, login_port: 6379}}\n')
    out = ansible('ansible-playbook', '-i', 'localhost,', '-c', 'local', str(playbook))
    assert out.returncode == 0, out.stdout + out.stderr
    assert 'sweeper=b' in out.stdout

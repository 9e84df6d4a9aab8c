"""An API server that does not answer the permission check and the reads (k8s_target's access entry point, one
vllm_k8s_read call): one line naming it, also when what is read is kept out of the output (no_log), and no token at
-vvv."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from harness.servers import free_port

TOKEN = 'unreachable-api-bearer-token-7f3a'


@pytest.mark.parametrize('reads', [[], [{'key': 'pods', 'kind': 'Pod', 'label_selectors': ['app=vllm']}]],
                         ids=['permissions only', 'with reads'])
def test_an_api_server_that_does_not_answer_is_named_in_one_line_without_the_token(tmp_path, reads):
    play = [{'hosts': 'localhost', 'gather_facts': False,
             'vars': {'vllm_dr_k8s_namespace': 'vllm',
                      'vllm_dr_k8s_auth': {'host': f'https://127.0.0.1:{free_port()}', 'api_key': TOKEN,
                                           'validate_certs': False}},
             'tasks': [{'ansible.builtin.include_role': {'name': 'inferops.vllm_dr.k8s_target', 'tasks_from': 'access'},
                        'vars': {'_vllm_dr_k8s_wanted': [{'verb': 'list', 'resource': 'pods'}],
                                 '_vllm_dr_k8s_reads': reads}}]}]
    (tmp_path / 'play.yml').write_text(yaml.safe_dump(play))
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-vvv', '-i', 'localhost,',
                          '-c', 'local', '-e', f'ansible_python_interpreter={sys.executable}', str(tmp_path / 'play.yml')],
                         capture_output=True, text=True, timeout=300, check=False,
                         env=dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='0'))
    output = out.stdout + out.stderr
    assert out.returncode == 2, output
    assert 'could not reach the Kubernetes API server' in output, output
    # the fail task says it, not a module crash or a templating error
    assert 'Fail with the permissions that are missing, or the read that failed' in output, output
    assert 'has no attribute' not in output and 'Traceback' not in output, output
    assert TOKEN not in output

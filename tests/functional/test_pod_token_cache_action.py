"""The vllm_pod_token_cache action as a playbook runs it, through kubernetes.core's kubectl connection. The kubectl
it finds on PATH here is a stand-in that runs `kubectl exec -i <pod> -- <command>` on this machine with POD_DIR set
to pods/<pod>/, so that each pod's cache ($POD_DIR/token_cache.db: the module expands the variable) is a file of its
own. The Kubernetes suite runs the action against a real API server; this one checks what the action does before any
pod is touched."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

from harness.caches import expiring, make_cache

BIN = os.path.dirname(sys.executable)
PODS = ('vllm-0', 'vllm-1')
STAND_IN = '''#!{python}
import os, sys
args = sys.argv[1:]
at = args.index('exec')
pod = args[at + 2]  # exec -i <pod>
command = args[args.index('--') + 1:]
os.environ['POD_DIR'] = os.path.join({root!r}, pod)
os.execvp(command[0], command)
'''


def purge(tmp_path, dest: str, *extra) -> tuple:
    """(rc, the task's result or the run's output) of the action purging both pods' caches into `dest`."""
    root = tmp_path / 'pods'
    for pod in PODS:
        (root / pod).mkdir(parents=True)
        make_cache(root / pod / 'token_cache.db', expiring(3))
    tools = tmp_path / 'bin'
    tools.mkdir()
    (tools / 'kubectl').write_text(STAND_IN.format(python=sys.executable, root=str(root)))
    (tools / 'kubectl').chmod(0o755)
    play = tmp_path / 'play.yml'
    play.write_text(f"""
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.add_host:
        name: "lab/vllm/{{{{ item }}}}"
        ansible_kubectl_pod: "{{{{ item }}}}"
        ansible_kubectl_namespace: vllm
        ansible_python_interpreter: {sys.executable}
      loop: {json.dumps(list(PODS))}
    - inferops.vllm_dr.vllm_pod_token_cache:
        pods: {json.dumps([f'lab/vllm/{pod}' for pod in PODS])}
        module: vllm_token_cache
        module_args: {{path: $POD_DIR/token_cache.db, state: absent, backup_dir: $POD_DIR/backups}}
        dest: {json.dumps(dest)}
        parallel: 2
      register: purged
    - ansible.builtin.copy:
        content: "{{{{ purged | to_json }}}}"
        dest: {tmp_path / 'result.json'}
        mode: "0600"
      check_mode: false
""")
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               PATH=f'{tools}{os.pathsep}{os.environ["PATH"]}')
    out = subprocess.run([os.path.join(BIN, 'ansible-playbook'), '-i', 'localhost,', '-c', 'local', str(play), *extra],
                         capture_output=True, text=True, env=env, timeout=300, check=False)
    if out.returncode:
        return out.returncode, out.stdout + out.stderr
    return 0, json.loads((tmp_path / 'result.json').read_text())


def test_both_pods_are_purged_and_each_backup_reaches_dest_checked(tmp_path):
    dest = tmp_path / 'run' / 'backups'
    rc, result = purge(tmp_path, str(dest))
    assert rc == 0, result
    assert [(pod['item'], pod['failed'], pod['changed']) for pod in result['pods']] == [
        (f'lab/vllm/{pod}', False, True) for pod in PODS]
    assert (dest.stat().st_mode & 0o777) == 0o700
    for copy in result['copies']:
        kept = copy['dest']
        assert os.path.dirname(kept).startswith(str(dest / 'vllm_vllm-')), copy
        with open(kept, 'rb') as handle:
            assert hashlib.sha256(handle.read()).hexdigest() == copy['checksum']
        assert (os.stat(kept).st_mode & 0o777) == 0o600
    assert len(result['copies']) == len(PODS)
    for pod in PODS:
        assert not (tmp_path / 'pods' / pod / 'token_cache.db').exists()


def test_a_dest_the_controller_cannot_write_fails_in_one_line_before_any_pod_is_purged(tmp_path):
    blocked = tmp_path / 'a-file'
    blocked.write_text('not a directory')
    rc, output = purge(tmp_path, str(blocked / 'backups'))
    assert rc != 0
    # the task's message is one line (Ansible prints it twice: the error, then the task's result)
    message = f'{blocked / "backups"} cannot hold the backups: Not a directory; give dest a directory the controller ' \
              'can write (nothing was purged)'
    assert f'"msg": "{message}"' in output, output
    assert 'Traceback' not in output
    for pod in PODS:
        assert (tmp_path / 'pods' / pod / 'token_cache.db').exists()
        assert not (tmp_path / 'pods' / pod / 'backups').exists()


def test_check_mode_makes_nothing_on_the_controller_and_touches_no_pod(tmp_path):
    dest = tmp_path / 'run' / 'backups'
    rc, result = purge(tmp_path, str(dest), '--check')
    assert rc == 0, result
    assert [pod['failed'] for pod in result['pods']] == [False, False] and result['copies'] == []
    assert not (tmp_path / 'run').exists()
    for pod in PODS:
        assert (tmp_path / 'pods' / pod / 'token_cache.db').exists()
        assert not (tmp_path / 'pods' / pod / 'backups').exists()

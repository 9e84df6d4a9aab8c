"""The purge script the init container and Velero's restore hook run: rendered by Ansible, run by sh."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from harness.playbooks import BIN, ROOT

TEMPLATE = os.path.join(ROOT, 'roles', 'purge', 'templates', 'purge-token-cache.sh.j2')


def render(tmp_path, cache_path: str) -> str:
    """The script as the purge role renders it for vllm_dr_cache_path=cache_path."""
    out = tmp_path / 'purge.sh'
    play = [{'hosts': 'localhost', 'gather_facts': False,
             'vars': {'vllm_dr_cache_path': cache_path, 'ansible_python_interpreter': sys.executable},
             'tasks': [{'name': 'Render the purge script',
                        'ansible.builtin.copy': {'content': f"{{{{ lookup('ansible.builtin.template', '{TEMPLATE}') }}}}",
                                                 'dest': str(out), 'mode': '0600'}}]}]
    (tmp_path / 'render.yml').write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='0')
    done = subprocess.run([os.path.join(BIN, 'ansible-playbook'), '-i', 'localhost,', '-c', 'local',
                           str(tmp_path / 'render.yml')], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return out.read_text()


@pytest.mark.parametrize('name', [
    "it's $(touch pwned-subst);touch pwned-semicolon '",
    'spaced dir ; touch pwned-semicolon',
    '`touch pwned-backtick`',
])
def test_purge_script_never_runs_a_cache_path_as_a_command(tmp_path, name):
    volume = tmp_path / 'volume' / name
    volume.mkdir(parents=True)
    cache = volume / 'token_cache.db'
    script = render(tmp_path, str(cache))
    cwd = tmp_path / 'cwd'
    cwd.mkdir()
    for run_number in range(7):
        cache.write_bytes(b'cache %d' % run_number)
        (volume / 'token_cache.db-wal').write_bytes(b'wal')
        done = subprocess.run(['sh', '-c', script], cwd=cwd, capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, done.stderr
        # nothing ran: no file appeared where the injected commands would have written it
        assert sorted(os.listdir(cwd)) == [], os.listdir(cwd)
        assert not any(entry.startswith('pwned') for entry in os.listdir(tmp_path))
        # the cache at that very path was moved aside, on its volume
        assert not cache.exists() and not (volume / 'token_cache.db-wal').exists()
    kept = sorted(os.listdir(volume / '.vllm_dr_backups'))
    assert len(kept) == 5, kept
    # the volume's parent was left alone: the rotation removed only old backups
    assert sorted(os.listdir(volume)) == ['.vllm_dr_backups']
    assert os.listdir(tmp_path / 'volume') == [name]

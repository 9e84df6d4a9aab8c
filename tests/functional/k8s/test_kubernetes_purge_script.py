"""The purge script the init container and Velero's restore hook run: rendered by Ansible, run by sh."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest
import yaml

from ansible_collections.inferops.vllm_dr.plugins.module_utils._token_cache import TokenCache, manage
from harness.playbooks import BIN, ROOT

TEMPLATE = os.path.join(ROOT, 'roles', 'purge', 'templates', 'purge-token-cache.sh.j2')


def render(tmp_path, cache_path: str, **overrides) -> str:
    """The script as the purge role renders it for vllm_dr_cache_path=cache_path, with its defaults and overrides."""
    out = tmp_path / 'purge.sh'
    play = [{'hosts': 'localhost', 'gather_facts': False,
             'vars_files': [os.path.join(ROOT, 'roles', 'purge', 'defaults', 'main.yml')],
             'tasks': [{'name': 'Render the purge script',
                        'ansible.builtin.copy': {'content': f"{{{{ lookup('ansible.builtin.template', '{TEMPLATE}') }}}}",
                                                 'dest': str(out), 'mode': '0600'}}]}]
    (tmp_path / 'render.yml').write_text(yaml.safe_dump(play))
    # the cache's place as the purge preconditions resolve it (_cache_reach.py): the path, the backups beside it
    backups = overrides.pop('vllm_dr_k8s_pod_backup_dir', os.path.join(os.path.dirname(cache_path), '.vllm_dr_backups'))
    extra = dict(overrides, vllm_dr_cache_path=cache_path, ansible_python_interpreter=sys.executable,
                 _vllm_dr_k8s_cache_place={'location': cache_path, 'backup_dir': backups})
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='0')
    done = subprocess.run([os.path.join(BIN, 'ansible-playbook'), '-i', 'localhost,', '-c', 'local',
                           '-e', json.dumps(extra), str(tmp_path / 'render.yml')],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
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


STAMPED = re.compile(r'\.\d{8}T\d{6}\.\d{6}Z\.')


def sqlite_cache(path, token: str) -> bytes:
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE tokens (token TEXT, expires_at INTEGER)')
    conn.execute('INSERT INTO tokens VALUES (?, 1)', (token,))
    conn.commit()
    conn.close()
    return path.read_bytes()


def test_purge_script_applies_the_rules_of_the_module(tmp_path):
    """Every sidecar, vllm_dr_k8s_pod_backup_dir, the module's names, its restore, and the rotation's setting."""
    volume = tmp_path / 'volume'
    volume.mkdir()
    cache = volume / 'token_cache.db'
    backups = volume / 'kept elsewhere'
    script = render(tmp_path, str(cache), vllm_dr_k8s_pod_backup_dir=str(backups), vllm_dr_k8s_init_backups_keep=2)
    files = {'': sqlite_cache(cache, 'first'), '-wal': b'wal', '-shm': b'shm', '-journal': b'journal'}
    for suffix, content in files.items():
        (volume / f'token_cache.db{suffix}').write_bytes(content)

    subprocess.run(['sh', '-c', script], check=True, timeout=30)
    # all four moved aside, into the directory given, none into the default one
    assert sorted(os.listdir(volume)) == ['kept elsewhere']
    (start,) = os.listdir(backups)
    assert re.fullmatch(r'start-\d{8}T\d{6}\.\d{6}Z-\d+', start), start
    assert oct(os.stat(backups / start).st_mode & 0o777) == '0o700'
    names = sorted(os.listdir(backups / start))
    # the names the module gives the same files (its stamp masked as the script's is)
    module_names = TokenCache(str(cache))._backup_names(str(backups / start)).values()  # pylint: disable=protected-access
    assert [STAMPED.sub('.<stamp>.', name) for name in names] == \
        sorted(STAMPED.sub('.<stamp>.', os.path.basename(name)) for name in module_names)
    assert len({STAMPED.search(name).group(0) for name in names}) == 1
    main = backups / start / min(names)
    assert main.name.endswith('.bak')

    # the module puts the set back by the name of its .bak file, sidecars included, byte for byte
    restored = manage(TokenCache(str(cache)), 'restored', cutoff=0, restore_from=str(main), backup=False)
    assert restored['restored_files'] == sorted(str(volume / f'token_cache.db{suffix}') for suffix in files)
    assert {suffix: (volume / f'token_cache.db{suffix}').read_bytes() for suffix in files} == files

    # a sidecar left alone (no database) is moved aside too, as the module removes it; the rotation keeps two
    for suffix in files:
        (volume / f'token_cache.db{suffix}').unlink()
    (volume / 'token_cache.db-journal').write_bytes(b'lone journal')
    subprocess.run(['sh', '-c', script], check=True, timeout=30)
    assert sorted(os.listdir(volume)) == ['kept elsewhere']
    newest = max(os.listdir(backups))
    assert [STAMPED.sub('.<stamp>.', name) for name in os.listdir(backups / newest)] == \
        ['token_cache.db.<stamp>.bak-journal']
    sqlite_cache(cache, 'third')
    subprocess.run(['sh', '-c', script], check=True, timeout=30)
    kept = sorted(os.listdir(backups))
    assert len(kept) == 2 and start not in kept, kept
    # nothing to move: nothing changes
    subprocess.run(['sh', '-c', script], check=True, timeout=30)
    assert sorted(os.listdir(backups)) == kept

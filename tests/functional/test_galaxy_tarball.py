"""The collection as users get it: built by ansible-galaxy, installed from the tarball, run by ansible."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile

import pytest

from harness.caches import expiring, make_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def run(args, env, cwd=None):
    return subprocess.run([os.path.join(BIN, args[0])] + args[1:], env=env, cwd=cwd, check=False,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """The tarball built from this checkout, installed into an otherwise empty collections path."""
    work = tmp_path_factory.mktemp('galaxy')
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(work / 'collections'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_STDOUT_CALLBACK='minimal',
               ANSIBLE_LOCAL_TEMP=str(work / 'tmp'))
    built = run(['ansible-galaxy', 'collection', 'build', '--output-path', str(work), ROOT], env)
    assert built.returncode == 0, built.stderr
    tarball = work / 'inferops-vllm_dr-0.1.0.tar.gz'
    installed_run = run(['ansible-galaxy', 'collection', 'install', '--offline', '--no-deps',
                         '-p', str(work / 'collections'), str(tarball)], env)
    assert installed_run.returncode == 0, installed_run.stderr
    return {'env': env, 'tarball': tarball, 'work': work}


def test_tarball_ships_the_collection_and_not_the_test_lab(installed):
    with tarfile.open(installed['tarball']) as tar:
        names = tar.getnames()
    assert 'plugins/modules/vllm_token_cache.py' in names
    assert 'plugins/module_utils/_token_cache.py' in names
    assert 'MANIFEST.json' in names and 'meta/runtime.yml' in names
    private = ('tests/lab', 'tests/bench', 'tests/harness', '.venv', 'build', 'reports', 'tools', '.git')
    leaked = [name for name in names if name.startswith(private)]
    assert leaked == []


def test_installed_module_runs_ad_hoc(installed):
    cache = installed['work'] / 'token_cache.db'
    make_cache(cache, expiring(3))
    result = run(['ansible', 'localhost', '-m', 'inferops.vllm_dr.vllm_token_cache',
                  '-a', f'path={cache} restored_at=2999-01-01T00:00:00Z'], installed['env'])
    assert result.returncode == 0, result.stdout + result.stderr
    payload = json.loads(result.stdout.split('=>', 1)[1])
    assert payload['rows'] == 3 and payload['expired_rows'] == 3 and payload['stale'] is True
    assert installed['work'].as_posix() in result.stdout


def test_installed_module_docs_render(installed):
    result = run(['ansible-doc', 'inferops.vllm_dr.vllm_token_cache'], installed['env'])
    assert result.returncode == 0, result.stderr
    text = ' '.join(result.stdout.split())
    assert text.startswith('> MODULE inferops.vllm_dr.vllm_token_cache (') and str(installed['work']) in text
    assert 'Manages the SQLite token cache a vLLM service keeps on disk' in text
    for option in ('path', 'state', 'restored_at', 'cutoff', 'backup_dir', 'restore_from', 'lock_timeout'):
        assert re.search(rf'^- {option}\s', result.stdout, re.MULTILINE), option
    assert 'RETURN VALUES' in text and 'stale_reason' in text

"""The release tarball installs as users install it: `ansible-galaxy collection install <tarball>`, dependencies
resolved (no --no-deps), with no Galaxy to reach, in an environment with nothing but the `ansible` package. Every
collection galaxy.yml depends on must then be one that package bundles, in a version the range allows.

`make integration-host` runs this with the project's `ansible` (the newest release); `make floors` again with
`ansible` 9 (ansible-core 2.16, kubernetes.core 2.4.2), the oldest the collection supports."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
from importlib.metadata import version

import pytest
import yaml
from ansible.module_utils.compat.version import LooseVersion

from harness.caches import expiring, make_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def closed_port():
    """A loopback port nothing listens on: the Galaxy server the install is pointed at."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def satisfies(found, spec):
    for part in spec.split(','):
        part = part.strip()
        op = part.rstrip('0123456789.')
        want = LooseVersion(part[len(op):])
        have = LooseVersion(found)
        if not {'>=': have >= want, '>': have > want, '<': have < want, '<=': have <= want,
                '==': have == want, '!=': have != want, '': have == want}[op]:
            return False
    return True


@pytest.fixture(scope='module')
def install(tmp_path_factory):
    work = tmp_path_factory.mktemp('galaxy-install')
    nowhere = f'http://127.0.0.1:{closed_port()}'
    # no Galaxy, no proxy to one, no configuration or collections of the user's
    env = {key: value for key, value in os.environ.items() if not key.startswith('ANSIBLE_')}
    env.update(HOME=str(work / 'home'), ANSIBLE_GALAXY_SERVER=nowhere, ANSIBLE_NOCOLOR='1',
               ANSIBLE_COLLECTIONS_PATH=str(work / 'collections'), ANSIBLE_LOCAL_TEMP=str(work / 'tmp'),
               http_proxy=nowhere, https_proxy=nowhere, HTTP_PROXY=nowhere, HTTPS_PROXY=nowhere)
    built = subprocess.run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'build', '--output-path', str(work),
                            ROOT], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    tarball = next(work.glob('inferops-vllm_dr-*.tar.gz'))
    done = subprocess.run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', '-p',
                           str(work / 'collections'), str(tarball)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    return {'work': work, 'env': env, 'run': done}


def test_the_tarball_installs_offline_with_its_dependencies_resolved(install):
    done = install['run']
    assert done.returncode == 0, f"ansible {version('ansible')} (ansible-core {version('ansible-core')}):\n" \
        + done.stdout + done.stderr
    assert 'inferops.vllm_dr:0.1.0 was installed successfully' in done.stdout
    assert (install['work'] / 'collections' / 'ansible_collections' / 'inferops' / 'vllm_dr' / 'MANIFEST.json').is_file()


def test_every_dependency_is_one_the_ansible_package_bundles_in_range():
    with open(os.path.join(ROOT, 'galaxy.yml'), encoding='utf-8') as handle:
        dependencies = yaml.safe_load(handle).get('dependencies') or {}
    # the `ansible` package's bundle, in this interpreter's site-packages
    bundle = os.path.join(sysconfig.get_paths()['purelib'], 'ansible_collections')
    found = {}
    for name in dependencies:
        namespace, collection = name.split('.')
        manifest = os.path.join(bundle, namespace, collection, 'MANIFEST.json')
        if os.path.isfile(manifest):
            with open(manifest, encoding='utf-8') as handle:
                found[name] = json.load(handle)['collection_info']['version']
    out_of_range = {name: found.get(name) for name, spec in dependencies.items()
                    if name not in found or not satisfies(found[name], spec)}
    assert out_of_range == {}, f"ansible {version('ansible')} bundles {out_of_range}, galaxy.yml asks {dependencies}"


def test_the_installed_collection_runs(install):
    assert install['run'].returncode == 0
    cache = install['work'] / 'token_cache.db'
    make_cache(cache, expiring(2))
    result = subprocess.run([os.path.join(BIN, 'ansible'), 'localhost', '-m', 'inferops.vllm_dr.vllm_token_cache',
                             '-a', f'path={cache} restored_at=2999-01-01T00:00:00Z'],
                            env=install['env'], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    payload = json.loads(result.stdout.split('=>', 1)[1])
    assert payload['rows'] == 2 and payload['stale'] is True

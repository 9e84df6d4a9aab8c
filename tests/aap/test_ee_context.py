"""The build context `ansible-builder create` makes from extensions/ee/execution-environment.yml (tools/aap.sh ee):
it installs this collection, the collections its roles use, the Python and the system requirements the collection
declares, and kubectl. No image is built here (no container runtime): the context is what is checked.
"""

from __future__ import annotations

import io
import os
import re
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTEXT = os.environ.get('VLLM_DR_EE_CONTEXT', os.path.join(ROOT, 'build', 'aap', 'ee-context'))


def read(*parts):
    with open(os.path.join(*parts), encoding='utf-8') as handle:
        return handle.read()


def requirement_lines(text):
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith('#')]


@pytest.fixture(scope='module')
def containerfile():
    if not os.path.isfile(os.path.join(CONTEXT, 'Containerfile')):
        pytest.fail(f'no build context at {CONTEXT}: run tools/aap.sh ee')
    return read(CONTEXT, 'Containerfile')


def stage(containerfile, name):
    """The instructions of one build stage (FROM ... AS name up to the next FROM)."""
    match = re.search(rf'^FROM \S+ AS {name}$(.*?)(?=^FROM |\Z)', containerfile, re.MULTILINE | re.DOTALL)
    assert match, f'no stage {name}'
    return match.group(1)


@pytest.fixture(scope='module')
def collection_tarball(containerfile):
    galaxy = yaml.safe_load(read(CONTEXT, '_build', 'requirements.yml'))['collections']
    files = [entry['name'] for entry in galaxy if entry.get('type') == 'file']
    assert len(files) == 1
    # the galaxy stage copies _build to /build and installs from there
    assert files[0].startswith('/build/')
    path = os.path.join(CONTEXT, '_build', files[0][len('/build/'):])
    assert os.path.isfile(path), f'{files[0]} is not in the context'
    return tarfile.open(path)


def test_python_and_system_requirements_are_the_collections_own(containerfile):
    assert requirement_lines(read(CONTEXT, '_build', 'requirements.txt')) == requirement_lines(read(ROOT, 'requirements.txt'))
    assert requirement_lines(read(CONTEXT, '_build', 'bindep.txt')) == requirement_lines(read(ROOT, 'bindep.txt'))
    builder = stage(containerfile, 'builder')
    # merged with what the installed collections declare, then built into wheels ...
    assert re.search(r'introspect\.py introspect --user-pip=requirements\.txt --user-bindep=bindep\.txt', builder)
    assert 'COPY _build/requirements.txt requirements.txt' in builder and 'COPY _build/bindep.txt bindep.txt' in builder
    assert 'COPY --from=galaxy /usr/share/ansible /usr/share/ansible' in builder
    assert '/output/scripts/assemble' in builder
    # ... and installed into the final image
    assert '/output/scripts/install-from-bindep' in stage(containerfile, 'final')


def test_the_collection_in_the_context_declares_the_same_requirements(collection_tarball):
    """The build's introspection reads the installed collection's meta/execution-environment.yml: it must name
    files the tarball carries, equal to the checkout's."""
    def member(name):
        return collection_tarball.extractfile(name).read().decode('utf-8')
    manifest = yaml.safe_load(io.StringIO(member('MANIFEST.json')))['collection_info']
    assert (manifest['namespace'], manifest['name']) == ('inferops', 'vllm_dr')
    declared = yaml.safe_load(member('meta/execution-environment.yml'))['dependencies']
    assert requirement_lines(member(declared['python'])) == requirement_lines(read(ROOT, 'requirements.txt'))
    assert requirement_lines(member(declared['system'])) == requirement_lines(read(ROOT, 'bindep.txt'))
    with open(os.path.join(ROOT, 'galaxy.yml'), encoding='utf-8') as handle:
        assert manifest['version'] == yaml.safe_load(handle)['version']


def test_the_collections_the_roles_use_are_installed(containerfile):
    galaxy = yaml.safe_load(read(CONTEXT, '_build', 'requirements.yml'))['collections']
    with open(os.path.join(ROOT, 'galaxy.yml'), encoding='utf-8') as handle:
        dependencies = yaml.safe_load(handle)['dependencies']
    assert 'kubernetes.core' in dependencies
    versions = {entry['name']: entry.get('version') for entry in galaxy if entry.get('type') != 'file'}
    assert versions == dependencies
    galaxy_stage = stage(containerfile, 'galaxy')
    assert 'COPY _build /build' in galaxy_stage
    assert re.search(r'ansible-galaxy collection install .*-r requirements\.yml --collections-path "/usr/share/ansible/collections"',
                     galaxy_stage)


def test_kubectl_is_installed_checked_and_before_the_image_drops_root(containerfile):
    final = stage(containerfile, 'final')
    kubectl = final.index('/usr/local/bin/kubectl')
    assert 'sha256sum -c' in final[kubectl:]
    assert kubectl < final.index('USER 1000')
    with open(os.path.join(ROOT, 'tools', 'k8s', 'versions.env'), encoding='utf-8') as handle:
        tested = re.search(r'^K8S_VERSION=(\S+)$', handle.read(), re.MULTILINE).group(1)
    # the kubectl of the image is the version the Kubernetes suite runs
    assert f'ARG KUBECTL_VERSION={tested}' in final


def test_the_base_image_is_the_documented_one_and_python_is_the_modules(containerfile):
    with open(os.path.join(ROOT, 'extensions', 'ee', 'execution-environment.yml'), encoding='utf-8') as handle:
        definition = yaml.safe_load(handle)
    assert definition['version'] == 3
    base = definition['images']['base_image']['name']
    assert f'ARG EE_BASE_IMAGE="{base}"' in containerfile
    assert base in read(ROOT, 'docs', 'aap.md')
    assert 'ARG PYCMD="/usr/bin/python3.12"' in containerfile

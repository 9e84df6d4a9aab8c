"""The build context `ansible-builder create` makes from extensions/ee/execution-environment.yml (tools/aap.sh ee):
it installs this collection, the collection its roles use, the Python and the system requirements the collection
declares, and kubectl. No image is built here (no container runtime): the context is checked, and every step of its
Containerfile that needs no container runs for real, as the Containerfile words it: the galaxy stage's collection
install (offline), the builder's introspection, bindep on a RHEL 9 platform, the Python requirements into a clean
Python 3.12, the kubectl step against a loopback mirror. docs/aap.md lists the steps only the real build runs.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import textwrap
import threading

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
    assert 'install_kubectl.py' in final[:kubectl + 40] and 'SHA512SUMS' in final
    assert kubectl < final.index('USER 1000')
    with open(os.path.join(ROOT, 'tools', 'k8s', 'versions.env'), encoding='utf-8') as handle:
        tested = re.search(r'^K8S_VERSION=(\S+)$', handle.read(), re.MULTILINE).group(1)
    # the image's kubectl is of the minor version the Kubernetes suite runs (kubectl's version skew policy)
    version = re.search(r'^ARG KUBECTL_VERSION=(\S+)$', final, re.MULTILINE).group(1)
    assert version.rsplit('.', 1)[0] == tested.rsplit('.', 1)[0]


def test_the_base_image_is_the_documented_one_and_python_is_the_modules(containerfile):
    with open(os.path.join(ROOT, 'extensions', 'ee', 'execution-environment.yml'), encoding='utf-8') as handle:
        definition = yaml.safe_load(handle)
    assert definition['version'] == 3
    base = definition['images']['base_image']['name']
    assert f'ARG EE_BASE_IMAGE="{base}"' in containerfile
    assert base in read(ROOT, 'docs', 'aap.md')
    assert 'ARG PYCMD="/usr/bin/python3.12"' in containerfile
    # the minimal images have microdnf, not dnf: every package step of the build uses it
    assert definition['options']['package_manager_path'] == '/usr/bin/microdnf'
    assert 'ARG PKGMGR="/usr/bin/microdnf"' in containerfile
    assert 'ee-minimal-rhel9' in base


# --- every step of the Containerfile that runs without a container runtime, run for real ---------------------------

EE_PYTHON = os.environ.get('VLLM_DR_EE_PYTHON', '')
HUB = os.environ.get('VLLM_DR_EE_HUB', '')
PROJECT_PIP = os.environ.get('VLLM_DR_EE_PIP', '')
BIN = os.path.dirname(sys.executable)
# /etc/os-release of the UBI 9 image the AAP 2.5 EEs are built on: bindep's platform detection reads it
RHEL9_OS_RELEASE = '''NAME="Red Hat Enterprise Linux"
VERSION="9.6 (Plow)"
ID="rhel"
ID_LIKE="fedora"
VERSION_ID="9.6"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Red Hat Enterprise Linux 9.6 (Plow)"
'''
# The system packages the build may install: each one checked to be in the UBI 9 repositories (BaseOS, AppStream)
# that an EE build without a subscription has. A new system requirement must be checked there and added here.
UBI9_PACKAGES = {'python3', 'python3.12'}


def run_steps(label, script, cwd, env=None, timeout=900):
    done = subprocess.run(['bash', '-eo', 'pipefail', '-c', script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return done


def run_line(stage_text, marker):
    """The one RUN instruction of a stage that holds `marker`, its command as written (a folded line)."""
    lines = [line[len('RUN '):] for line in stage_text.splitlines() if line.startswith('RUN ') and marker in line]
    assert len(lines) == 1, f'{len(lines)} RUN lines with {marker}'
    return lines[0]


def arg_default(containerfile, name):
    return re.search(rf'^ARG {name}="?([^"\n]*)"?$', containerfile, re.MULTILINE).group(1)


def offline_env(home):
    nowhere = f'http://127.0.0.1:{closed_port()}'
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(('ANSIBLE_', 'PIP_')) and key.lower() not in ('http_proxy', 'https_proxy')}
    env.update(HOME=str(home), ANSIBLE_GALAXY_SERVER=nowhere, http_proxy=nowhere, https_proxy=nowhere,
               HTTP_PROXY=nowhere, HTTPS_PROXY=nowhere, PATH=BIN + os.pathsep + env.get('PATH', ''))
    return env


def closed_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def python_venv(path, *requirements):
    """A clean virtualenv of the base image's Python (3.12), with `requirements` installed by pip."""
    assert EE_PYTHON, 'VLLM_DR_EE_PYTHON is not set: run tools/aap.sh ee'
    subprocess.run([EE_PYTHON, '-m', 'venv', '--without-pip', str(path)], check=True, timeout=300)
    python = str(path / 'bin' / 'python')
    if requirements:
        done = subprocess.run([PROJECT_PIP, '-m', 'pip', '--python', python, 'install', '-q', '--no-compile',
                               '--disable-pip-version-check'] + list(requirements),
                              capture_output=True, text=True, timeout=900, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    return python


@pytest.fixture(scope='module')
def image(containerfile, tmp_path_factory):
    """What the galaxy and builder stages leave, made by their own commands from the context: /build, and
    /usr/share/ansible/collections with this collection installed offline beside kubernetes.core."""
    work = tmp_path_factory.mktemp('ee-steps')
    build = work / 'build'
    shutil.copytree(os.path.join(CONTEXT, '_build'), build)  # COPY _build /build
    # the image's absolute paths, inside this directory
    requirements = (build / 'requirements.yml').read_text().replace('/build/', f'{build}/')
    (build / 'requirements.yml').write_text(requirements)
    collections = work / 'usr' / 'share' / 'ansible' / 'collections'
    collections.mkdir(parents=True)
    env = offline_env(work / 'home')
    # kubernetes.core as an install from the site's automation hub leaves it (the real build fetches it there)
    assert HUB and os.path.isdir(os.path.join(HUB, 'kubernetes', 'core')), 'VLLM_DR_EE_HUB: run tools/aap.sh ee'
    shutil.copytree(os.path.join(HUB, 'kubernetes', 'core'), collections / 'ansible_collections' / 'kubernetes' / 'core',
                    ignore=shutil.ignore_patterns('__pycache__'))
    # the galaxy stage: its own command, Galaxy unreachable
    galaxy_stage = stage(containerfile, 'galaxy')
    install = run_line(galaxy_stage, 'ansible-galaxy collection install')
    install = install.replace('$ANSIBLE_GALAXY_CLI_COLLECTION_OPTS', '').replace(
        '"/usr/share/ansible/collections"', f'"{collections}"')
    galaxy = run_steps('galaxy', install, build, env)
    return {'work': work, 'build': build, 'collections': collections, 'galaxy': galaxy, 'env': env}


def test_the_galaxy_stage_installs_the_collection_offline_with_its_dependency_resolved(image):
    galaxy = image['galaxy']
    assert galaxy.returncode == 0, galaxy.stdout + galaxy.stderr
    assert 'inferops.vllm_dr:0.1.0 was installed successfully' in galaxy.stdout
    installed = image['collections'] / 'ansible_collections'
    assert (installed / 'inferops' / 'vllm_dr' / 'MANIFEST.json').is_file()
    assert (installed / 'kubernetes' / 'core' / 'MANIFEST.json').is_file()


@pytest.fixture(scope='module')
def introspected(containerfile, image):
    """The builder stage: `pip install bindep pyyaml packaging` into the base image's Python, then its introspection
    of the installed collections, as the Containerfile words them."""
    assert image['galaxy'].returncode == 0
    builder_stage = stage(containerfile, 'builder')
    tools = run_line(builder_stage, '-m pip install').split('install', 1)[1].replace('--no-cache-dir', '').split()
    python = python_venv(image['work'] / 'builder-python', *tools)
    src = image['work'] / 'tmp' / 'src'
    src.mkdir(parents=True)
    command = run_line(builder_stage, 'introspect.py').replace('$PYCMD', python).replace(
        '/output/scripts/', str(image['build'] / 'scripts') + '/').replace('/tmp/src/', f'{src}/')
    command += f" {image['collections']}"
    done = run_steps('introspect', command, image['build'], image['env'])
    assert done.returncode == 0, done.stdout + done.stderr
    return {'python': python, 'src': src}


def test_the_build_asks_only_for_system_packages_the_ubi9_repositories_have(introspected, tmp_path):
    """bindep as the build's assemble script runs it, on a RHEL 9 platform: the packages microdnf will install."""
    os_release = tmp_path / 'os-release'
    os_release.write_text(RHEL9_OS_RELEASE)
    script = textwrap.dedent('''
        import sys
        import distro.distro
        from bindep.depends import Depends
        distro.distro._distro = distro.LinuxDistribution(include_lsb=False, os_release_file=sys.argv[2],
                                                         distro_release_file='/nonexistent', include_uname=False)
        depends = Depends(open(sys.argv[1]).read())
        profiles = depends.platform_profiles()
        assert 'platform:rhel-9' in profiles and 'platform:rpm' in profiles, profiles
        for profile in (['default'], ['compile']):
            rules = depends.active_rules(profile + profiles if profile == ['default'] else profile)
            print(profile[0] + ':' + ' '.join(sorted({rule[0] for rule in rules})))
        ''')
    done = subprocess.run([introspected['python'], '-c', script, str(introspected['src'] / 'bindep.txt'),
                           str(os_release)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    packages = dict(line.split(':', 1) for line in done.stdout.splitlines())
    run_packages = set(packages['default'].split())
    # kubernetes.core asks for openshift-clients on RHEL 9: excluded, it is not in those repositories
    assert 'openshift-clients' not in run_packages
    assert 'openshift-clients' in (introspected['src'].parent.parent / 'build' / 'exclude-bindep.txt').read_text()
    assert run_packages and run_packages <= UBI9_PACKAGES, run_packages - UBI9_PACKAGES
    assert packages['compile'] == ''


def test_the_python_requirements_install_into_a_clean_python_312(introspected, tmp_path):
    requirements = (introspected['src'] / 'requirements.txt').read_text()
    # the collection's own and kubernetes.core's, merged by the introspection
    assert 'redis' in requirements and 'kubernetes' in requirements and 'jsonpatch' in requirements
    python = python_venv(tmp_path / 'final-python', '-r', str(introspected['src'] / 'requirements.txt'))
    check = subprocess.run([python, '-c', 'import sys, redis, hiredis, etcd3gw, kubernetes, jsonpatch, '
                            'requests_oauthlib; print("%d.%d" % sys.version_info[:2])'],
                           capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0 and check.stdout.strip() == '3.12', check.stdout + check.stderr


class Mirror:
    """A Kubernetes release mirror on loopback: files laid out as dl.k8s.io lays them out."""

    def __init__(self, root):
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
        handler.log_message = lambda *args: None
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
        self.url = f'http://127.0.0.1:{self.server.server_address[1]}'
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def client_tarball(path, kubectl_text):
    data = kubectl_text.encode()
    info = tarfile.TarInfo('kubernetes/client/bin/kubectl')
    info.size, info.mode = len(data), 0o755
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, 'w:gz') as tar:
        tar.addfile(info, io.BytesIO(data))
    return hashlib.sha512(path.read_bytes()).hexdigest()


@pytest.fixture
def kubectl_step(containerfile, tmp_path):
    """The final stage's kubectl step as written, run against a loopback mirror: (run(sums_dir) -> result, dest)."""
    version = arg_default(containerfile, 'KUBECTL_VERSION')
    arch = {'x86_64': 'amd64', 'aarch64': 'arm64'}[platform.machine()]
    mirror_root = tmp_path / 'mirror'
    served_sum = client_tarball(mirror_root / version / f'kubernetes-client-linux-{arch}.tar.gz',
                                f'#!/bin/sh\necho "Client Version: {version}"\n')
    mirror = Mirror(mirror_root)
    dest = tmp_path / 'usr-local-bin' / 'kubectl'
    dest.parent.mkdir()
    command = run_line(stage(containerfile, 'final'), 'install_kubectl.py')

    def run(kubectl_dir):
        script = (command.replace('$PYCMD', EE_PYTHON).replace('/output/kubectl', str(kubectl_dir))
                  .replace('/usr/local/bin/kubectl', str(dest)))
        env = dict(os.environ, KUBECTL_VERSION=version, KUBECTL_MIRROR=mirror.url)
        return run_steps('kubectl', script, tmp_path, env, timeout=300)
    try:
        yield {'run': run, 'dest': dest, 'version': version, 'arch': arch, 'sum': served_sum}
    finally:
        mirror.close()


def test_kubectl_from_a_mirror_that_serves_other_bytes_than_the_release_is_refused(kubectl_step):
    done = kubectl_step['run'](os.path.join(CONTEXT, '_build', 'kubectl'))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and 'SHA512SUMS says' in lines[0] and 'not installed' in lines[0], done.stderr
    assert not kubectl_step['dest'].exists()


def test_kubectl_from_a_mirror_is_installed_once_its_sum_is_the_one_kept(kubectl_step, tmp_path):
    kept = tmp_path / 'kubectl-kept'
    shutil.copytree(os.path.join(CONTEXT, '_build', 'kubectl'), kept)
    name = f"{kubectl_step['version']}/kubernetes-client-linux-{kubectl_step['arch']}.tar.gz"
    (kept / 'SHA512SUMS').write_text(f"{kubectl_step['sum']}  {name}\n")
    done = kubectl_step['run'](kept)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Client Version: {kubectl_step['version']}" in done.stdout
    assert os.stat(kubectl_step['dest']).st_mode & 0o777 == 0o755


def test_kubectl_sums_are_kept_here_for_the_pinned_version_and_no_sum_is_fetched(containerfile):
    final = stage(containerfile, 'final')
    version = arg_default(containerfile, 'KUBECTL_VERSION')
    sums = read(ROOT, 'extensions', 'ee', 'kubectl', 'SHA512SUMS')
    for arch in ('amd64', 'arm64'):
        assert re.search(rf'^[0-9a-f]{{128}}  {re.escape(version)}/kubernetes-client-linux-{arch}\.tar\.gz$', sums,
                         re.MULTILINE), arch
    # nothing in the image's steps fetches a sum: the one in the context is the only one
    assert 'sha256' not in final and '.sha512' not in final.replace('SHA512SUMS', '')
    assert arg_default(containerfile, 'KUBECTL_MIRROR') == 'https://dl.k8s.io'

"""make build: the same commit gives the same tarball, whatever the checkout, the time, the umask or the temp dir."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
TOOL = os.path.join(ROOT, 'tools', 'build_collection.py')
TARBALL = 'inferops-vllm_dr-0.1.0.tar.gz'

sys.path.insert(0, os.path.join(ROOT, 'tools'))
import build_collection  # noqa: E402  pylint: disable=wrong-import-position


def git(repo, *args):
    return subprocess.run(['git', '-C', str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def checkout(dest, commit):
    subprocess.run(['git', 'clone', '--quiet', '--shared', '--no-checkout', ROOT, str(dest)], check=True)
    git(dest, 'checkout', '--quiet', '--detach', commit)
    return dest


def build(repo, commit, out, umask, tmpdir):
    os.makedirs(tmpdir, exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmpdir))
    command = [sys.executable, TOOL, '--repo', str(repo), '--commit', commit, '--output-dir', str(out)]
    done = subprocess.run(['sh', '-c', f'umask {umask:03o} && exec "$@"', 'sh', *command],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def members(path):
    with tarfile.open(path) as tar:
        return tar.getmembers()


def read_member(path, name):
    with tarfile.open(path) as tar:
        return tar.extractfile(name).read()


@pytest.fixture(scope='module')
def builds(tmp_path_factory):
    """HEAD built twice: two checkouts (one with other mtimes), two seconds, two umasks, two temp dirs."""
    work = tmp_path_factory.mktemp('reproducible')
    commit = git(ROOT, 'rev-parse', 'HEAD')
    first = checkout(work / 'a', commit)
    second = checkout(work / 'elsewhere' / 'b', commit)
    for parent, _dirs, files in os.walk(second):
        for number, name in enumerate(files):
            os.utime(os.path.join(parent, name), (1_000_000_000 + number, 1_000_000_000 + number))
    started = time.time()
    first_out = build(first, commit, work / 'out-a', 0o022, work / 'tmp-a')
    while int(time.time()) == int(started):
        time.sleep(0.1)
    second_out = build(second, commit, work / 'out-b', 0o002, work / 'tmp-b')
    return {'work': work, 'commit': commit, 'epoch': int(git(ROOT, 'show', '-s', '--format=%ct', commit)),
            'first': work / 'out-a' / TARBALL, 'second': work / 'out-b' / TARBALL,
            'outputs': (first_out, second_out), 'checkout': first}


def test_same_commit_builds_the_same_bytes(builds):
    first, second = builds['first'].read_bytes(), builds['second'].read_bytes()
    assert hashlib.sha256(first).hexdigest() == hashlib.sha256(second).hexdigest()
    assert first == second
    for output in builds['outputs']:
        assert f"commit {builds['commit']}" in output
        assert f'sha256 {hashlib.sha256(first).hexdigest()}' in output


def test_tarball_carries_the_commit_time_sorted_entries_and_no_owner(builds):
    data = builds['first'].read_bytes()
    assert int.from_bytes(data[4:8], 'little') == builds['epoch']  # gzip header MTIME
    assert data[3] & 0x08 == 0  # no FNAME: the header names no build path
    entries = members(builds['first'])
    assert [(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in entries] == [(builds['epoch'], 0, 0, '', '')] * len(entries)
    names = [m.name for m in entries]
    assert names[:2] == ['MANIFEST.json', 'FILES.json'] and names[2:] == sorted(names[2:])
    listed = [entry['name'] for entry in json.loads(read_member(builds['first'], 'FILES.json'))['files']]
    assert listed == ['.'] + names[2:]


def test_tarball_holds_what_ansible_galaxy_builds_with_checksums_that_hold(builds):
    plain_out = builds['work'] / 'plain'
    done = subprocess.run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'build', '--output-path', str(plain_out),
                           str(builds['checkout'])], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    plain = plain_out / TARBALL
    assert sorted(m.name for m in members(plain)) == sorted(m.name for m in members(builds['first']))
    assert {(m.name, m.mode) for m in members(plain)} == {(m.name, m.mode) for m in members(builds['first'])}

    def entries(path):
        return sorted(json.dumps(entry, sort_keys=True) for entry in json.loads(read_member(path, 'FILES.json'))['files'])
    assert entries(plain) == entries(builds['first'])

    manifest = json.loads(read_member(builds['first'], 'MANIFEST.json'))
    files_json = read_member(builds['first'], 'FILES.json')
    assert manifest['file_manifest_file']['chksum_sha256'] == hashlib.sha256(files_json).hexdigest()
    assert manifest['collection_info'] == json.loads(read_member(plain, 'MANIFEST.json'))['collection_info']
    for entry in json.loads(files_json)['files']:
        if entry['ftype'] == 'file':
            assert hashlib.sha256(read_member(builds['first'], entry['name'])).hexdigest() == entry['chksum_sha256']


def test_reproducible_tarball_installs_and_verifies(builds):
    collections = builds['work'] / 'collections'
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR='1')
    galaxy = os.path.join(BIN, 'ansible-galaxy')
    installed = subprocess.run([galaxy, 'collection', 'install', '--offline', '--no-deps', '-p', str(collections),
                                str(builds['first'])], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert 'inferops.vllm_dr:0.1.0 was installed successfully' in installed.stdout
    verified = subprocess.run([galaxy, 'collection', 'verify', '--offline', '-p', str(collections), 'inferops.vllm_dr'],
                              env=env, capture_output=True, text=True, timeout=300, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert 'internally consistent with its manifest' in verified.stdout


def test_repack_refuses_a_file_that_does_not_match_files_json(builds, tmp_path):
    tampered = tmp_path / TARBALL
    with tarfile.open(builds['first']) as source, tarfile.open(tampered, 'w:gz') as out:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            if member.name == 'README.md':
                data += b'\nchanged after FILES.json was written\n'
                member.size = len(data)
            out.addfile(member, io.BytesIO(data) if data is not None else None)
    with pytest.raises(build_collection.BuildError, match=r'^README\.md does not match its checksum in FILES\.json$'):
        build_collection.repack(str(tampered), builds['epoch'])

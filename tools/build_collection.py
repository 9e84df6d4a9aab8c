"""Builds the collection's Galaxy tarball from a commit, byte for byte the same on every build of that commit.

ansible-galaxy (ansible-core 2.19) does not honour SOURCE_DATE_EPOCH: MANIFEST.json and FILES.json enter the
tar with the time of the build, every other file with its mtime in the checkout, the entries in the order the
file system lists them, and the gzip header carries the time of the build. So the tarball is built by
ansible-galaxy from a clean `git archive` export of the commit, then re-packed: FILES.json's entries sorted by
name (and MANIFEST.json's checksum of it updated), the tar entries in that order, every mtime the commit's time,
owner 0:0 without names, and gzip's header time the commit's time. Every file's checksum is checked against
FILES.json while re-packing, as ansible-galaxy checks it at install.

    python tools/build_collection.py [--commit REV] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GZIP_LEVEL = 9  # what tarfile's 'w:gz' uses, so the size stays as ansible-galaxy makes it


class BuildError(Exception):
    """A build that cannot give a trustworthy tarball; the message says why."""


def git(repo: str, *args: str) -> bytes:
    done = subprocess.run(['git', '-C', repo, *args], capture_output=True, check=False)
    if done.returncode != 0:
        raise BuildError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def commit_and_time(repo: str, rev: str) -> tuple[str, int]:
    commit = git(repo, 'rev-parse', '--verify', '--end-of-options', f'{rev}^{{commit}}').decode().strip()
    return commit, int(git(repo, 'show', '-s', '--format=%ct', commit).decode().strip())


def export_commit(repo: str, commit: str, epoch: int, dest: str) -> None:
    """The commit's tracked files only, every path's mtime the commit's time."""
    with tarfile.open(fileobj=io.BytesIO(git(repo, 'archive', '--format=tar', commit))) as tar:
        tar.extractall(dest, filter='data')
    for parent, dirs, files in os.walk(dest):
        for name in dirs + files:
            os.utime(os.path.join(parent, name), (epoch, epoch), follow_symlinks=False)
    os.utime(dest, (epoch, epoch))


def ansible_galaxy() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), 'ansible-galaxy')
    return beside if os.path.exists(beside) else 'ansible-galaxy'


def galaxy_build(source: str, out_dir: str) -> str:
    done = subprocess.run([ansible_galaxy(), 'collection', 'build', '--output-path', out_dir, source],
                          capture_output=True, text=True, check=False)
    built = [name for name in os.listdir(out_dir) if name.endswith('.tar.gz')] if done.returncode == 0 else []
    if len(built) != 1:
        raise BuildError(f'ansible-galaxy collection build failed: {(done.stderr or done.stdout).strip()}')
    return os.path.join(out_dir, built[0])


def manifest_json(data: dict) -> bytes:
    return json.dumps(data, indent=True).encode()  # as ansible-galaxy writes both manifests


def sorted_files_manifest(files_manifest: dict) -> dict:
    """Entries by name, the collection root '.' first; a directory still comes before what it holds."""
    root = [entry for entry in files_manifest['files'] if entry['name'] == '.']
    rest = sorted((entry for entry in files_manifest['files'] if entry['name'] != '.'), key=lambda e: e['name'])
    return dict(files_manifest, files=root + rest)


def fixed_entry(name: str, kind: bytes, mode: int, epoch: int, size: int = 0, linkname: str = '') -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname, info.mtime = kind, mode, size, linkname, epoch
    info.uid = info.gid = 0
    info.uname = info.gname = ''
    return info


def repack(galaxy_tarball: str, epoch: int) -> bytes:
    """ansible-galaxy's tarball with nothing in it that depends on when or where it was built."""
    with tarfile.open(galaxy_tarball) as tar:
        members = {member.name: member for member in tar.getmembers()}
        contents = {name: tar.extractfile(member).read() for name, member in members.items() if member.isfile()}

    manifest = json.loads(contents.pop('MANIFEST.json'))
    original_files_json = contents.pop('FILES.json')
    if hashlib.sha256(original_files_json).hexdigest() != manifest['file_manifest_file']['chksum_sha256']:
        raise BuildError('ansible-galaxy wrote a FILES.json that does not match the checksum in MANIFEST.json')
    files_manifest = sorted_files_manifest(json.loads(original_files_json))
    files_json = manifest_json(files_manifest)
    manifest['file_manifest_file']['chksum_sha256'] = hashlib.sha256(files_json).hexdigest()

    listed = [entry for entry in files_manifest['files'] if entry['name'] != '.']
    unlisted = sorted(set(members) - {entry['name'] for entry in listed} - {'MANIFEST.json', 'FILES.json'})
    if unlisted:
        raise BuildError(f"the tarball holds files FILES.json does not list: {', '.join(unlisted)}")

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode='w', format=tarfile.PAX_FORMAT) as out:
        for name, data in (('MANIFEST.json', manifest_json(manifest)), ('FILES.json', files_json)):
            out.addfile(fixed_entry(name, tarfile.REGTYPE, members[name].mode, epoch, len(data)), io.BytesIO(data))
        for entry in listed:
            member = members.get(entry['name'])
            if member is None:
                raise BuildError(f"FILES.json lists {entry['name']}, which the tarball does not hold")
            if member.isfile():
                data = contents[member.name]
                if entry['ftype'] != 'file' or hashlib.sha256(data).hexdigest() != entry['chksum_sha256']:
                    raise BuildError(f'{member.name} does not match its checksum in FILES.json')
                out.addfile(fixed_entry(member.name, tarfile.REGTYPE, member.mode, epoch, len(data)),
                            io.BytesIO(data))
            else:
                out.addfile(fixed_entry(member.name, member.type, member.mode, epoch, linkname=member.linkname))

    packed = io.BytesIO()
    with gzip.GzipFile(filename='', mode='wb', fileobj=packed, compresslevel=GZIP_LEVEL, mtime=epoch) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()


def build(repo: str, rev: str, output_dir: str) -> tuple[str, str, str]:
    """Returns the tarball's path, its sha256 and the commit it was built from."""
    commit, epoch = commit_and_time(repo, rev)
    with tempfile.TemporaryDirectory(prefix='vllm_dr-build-') as work:
        source, galaxy_out = os.path.join(work, 'collection'), os.path.join(work, 'galaxy')
        os.mkdir(source)
        os.mkdir(galaxy_out)
        export_commit(repo, commit, epoch, source)
        galaxy_tarball = galaxy_build(source, galaxy_out)
        data = repack(galaxy_tarball, epoch)
        os.makedirs(output_dir, exist_ok=True)
        target = os.path.join(output_dir, os.path.basename(galaxy_tarball))
        partial = os.path.join(work, 'partial.tar.gz')
        with open(partial, 'wb') as out:
            out.write(data)
        os.chmod(partial, 0o644)
        shutil.move(partial, target)
    return target, hashlib.sha256(data).hexdigest(), commit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--commit', default='HEAD', help='the commit to build (default: HEAD)')
    parser.add_argument('--output-dir', default=os.path.join(ROOT, 'build'), help='where the tarball goes')
    parser.add_argument('--repo', default=ROOT, help='the git checkout to build from (default: this one)')
    args = parser.parse_args(argv)
    try:
        target, digest, commit = build(args.repo, args.commit, args.output_dir)
    except BuildError as exc:
        print(f'build_collection: {exc}', file=sys.stderr)
        return 1
    if git(args.repo, 'status', '--porcelain', '--untracked-files=no').strip():
        print(f'build_collection: uncommitted changes are not in the tarball; it is built from {commit}',
              file=sys.stderr)
    print(f'{target}\ncommit {commit}\nsha256 {digest}')
    return 0


if __name__ == '__main__':
    sys.exit(main())

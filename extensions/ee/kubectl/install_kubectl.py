# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Install kubectl into the execution environment from a Kubernetes release mirror, checked against SHA512SUMS.

    python3 install_kubectl.py VERSION MIRROR SUMS DEST

Fetches MIRROR/VERSION/kubernetes-client-linux-<arch>.tar.gz (the layout of https://dl.k8s.io, which a disconnected
site mirrors as files on any HTTP server; file:// works too), checks its sha512 against the line for that file in
SUMS (kept in the collection, copied from the Kubernetes release notes, never fetched from the mirror), and only then
writes the tarball's kubernetes/client/bin/kubectl to DEST, mode 0755. Needs only Python's standard library (the
minimal base images carry neither tar nor a package for kubectl). Any problem: one line on stderr, exit 1, nothing
written.
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import sys
import tarfile
import tempfile
import urllib.request

ARCHES = {'x86_64': 'amd64', 'amd64': 'amd64', 'aarch64': 'arm64', 'arm64': 'arm64'}
MEMBER = 'kubernetes/client/bin/kubectl'


class InstallError(Exception):
    pass


def expected_sum(sums_path: str, name: str) -> str:
    with open(sums_path, encoding='utf-8') as handle:
        for line in handle:
            fields = line.split()
            if len(fields) == 2 and fields[1].lstrip('*') == name:
                return fields[0].lower()
    raise InstallError(f'{sums_path} has no sha512 for {name}; add the line from the Kubernetes release notes '
                       f'(CHANGELOG, "Client Binaries") or set KUBECTL_VERSION to a version it lists')


def install(version: str, mirror: str, sums_path: str, dest: str, machine: str | None = None) -> str:
    arch = ARCHES.get((machine or platform.machine()).lower())
    if not arch:
        raise InstallError(f'no kubectl for machine {machine or platform.machine()}; SHA512SUMS lists amd64 and arm64')
    name = f'{version}/kubernetes-client-linux-{arch}.tar.gz'
    want = expected_sum(sums_path, name)
    url = f"{mirror.rstrip('/')}/{name}"
    try:
        with urllib.request.urlopen(url, timeout=300) as response:  # noqa: S310 - the mirror is the site's choice
            data = response.read()
    except (OSError, ValueError) as error:
        raise InstallError(f'cannot fetch {url}: {error}; check KUBECTL_MIRROR') from None
    got = hashlib.sha512(data).hexdigest()
    if got != want:
        raise InstallError(f'{url} has sha512 {got}, SHA512SUMS says {want}: not installed; the mirror serves '
                           'another file than the release')
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode='r:gz') as archive:
            binary = archive.extractfile(MEMBER).read()
    except (tarfile.TarError, KeyError, AttributeError) as error:
        raise InstallError(f'{url} has no {MEMBER}: {error}') from None
    directory = os.path.dirname(os.path.abspath(dest))
    fd, partial = tempfile.mkstemp(dir=directory, prefix='.kubectl.')
    with os.fdopen(fd, 'wb') as handle:
        handle.write(binary)
    os.chmod(partial, 0o755)
    os.replace(partial, dest)
    return url


def main(argv: list) -> int:
    if len(argv) != 4:
        print('usage: install_kubectl.py VERSION MIRROR SUMS DEST', file=sys.stderr)
        return 2
    try:
        url = install(*argv)
    except InstallError as error:
        print(f'kubectl: {error}', file=sys.stderr)
        return 1
    print(f'kubectl: {argv[3]} from {url}, sha512 checked')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

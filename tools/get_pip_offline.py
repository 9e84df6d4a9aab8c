"""Offline stand-in for the get-pip.py script that ansible-test downloads.

ansible-test bootstraps pip into each sanity-test virtualenv with a get-pip
script fetched from a host that is not reachable from every network. It looks
for the script in its cache first; tools/ansible-test.sh puts this file there.
It bootstraps pip from the interpreter's own ensurepip wheel, then installs the
packages ansible-test asked for from the configured package index.
"""

from __future__ import annotations

import subprocess
import sys

# get-pip.py accepts these, pip install does not.
GET_PIP_ONLY_OPTIONS = frozenset(('--no-setuptools', '--no-wheel'))


def main() -> None:
    subprocess.check_call([sys.executable, '-m', 'ensurepip', '--upgrade', '--default-pip'])
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    subprocess.check_call([sys.executable, '-m', 'pip', 'install'] + args)


if __name__ == '__main__':
    main()

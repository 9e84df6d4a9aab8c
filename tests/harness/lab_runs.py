"""The incident lab, up for one test, with its runbook inventory written to a file."""

from __future__ import annotations

import contextlib

import yaml

from harness.playbooks import playbook
from lab.labctl import Lab


@contextlib.contextmanager
def running_lab(tmp_path, sessions: int = 2):
    """A healthy lab; lab.inventory_path names its inventory, reports go to lab.reports (tmp_path/reports)."""
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=sessions)
    try:
        yield write_inventory(lab, tmp_path)
    finally:
        lab.down()


def write_inventory(lab, tmp_path):
    """The lab's runbook inventory written to tmp_path/inventory.yml (lab.inventory_path) as the lab stands now (after
    a restore it carries restored_at); reports go to lab.reports (tmp_path/reports)."""
    inventory = tmp_path / 'inventory.yml'
    inventory.write_text(yaml.safe_dump(lab.inventory(str(tmp_path / 'reports'))))
    lab.inventory_path = str(inventory)
    lab.reports = tmp_path / 'reports'
    return lab


@contextlib.contextmanager
def incident_lab(tmp_path, sessions: int = 3, tls: bool = False):
    """The lab after the incident: snapshot taken, tokens rotated at the provider, snapshot restored (its gateway on
    https with a private CA when `tls`)."""
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=sessions, tls=tls)
    try:
        lab.snapshot()
        lab.rotate()
        lab.restore()
        yield lab
    finally:
        lab.down()


@contextlib.contextmanager
def keycloak_lab(tmp_path, keycloak, sessions: int = 3):
    """A healthy lab whose provider is a realm of its own (named after the test's directory) in ``keycloak``."""
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=sessions, idp='keycloak', keycloak_url=keycloak.url, keycloak_admin=keycloak.admin,
           realm=f'lab-{tmp_path.name}'[:36])
    try:
        yield write_inventory(lab, tmp_path)
    finally:
        lab.down()


def run_with(lab, tmp_path, host_vars: dict, *extra, name: str = 'dr_restore.yml') -> tuple:
    """(rc, output) of playbook `name` on the lab, its inventory's host variables overridden by `host_vars` (written
    to tmp_path/inventory.yml; reports in tmp_path/reports)."""
    inventory = lab.inventory(str(tmp_path / 'reports'))
    inventory['all']['children']['vllm']['hosts']['lab'].update(host_vars)
    path = tmp_path / 'inventory.yml'
    path.write_text(yaml.safe_dump(inventory))
    return playbook(str(path), name, *extra)

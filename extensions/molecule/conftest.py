"""Shared by the testinfra verifiers: the lab's variables, as prepare.yml wrote them."""

from __future__ import annotations

import os

import pytest
import yaml


@pytest.fixture(scope='module')
def lab_vars():
    with open(os.path.join(os.environ['MOLECULE_EPHEMERAL_DIRECTORY'], 'lab', 'vars.yml'), encoding='utf-8') as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope='module')
def lab_dir():
    return os.path.join(os.environ['MOLECULE_EPHEMERAL_DIRECTORY'], 'lab')

"""dr_detect.yml -e vllm_dr_auto_repair=true on a healthy incident lab never repairs what the probe alone says is
broken: a race with the service's own refresh of the probe session, one transient invalid_grant from the provider,
and only the probe's session revoked (the cache current) all leave the service running untouched. The true incident
is still repaired (tests/functional/observability/test_detection_lab.py)."""

from __future__ import annotations

import os

import pytest

from harness.lab_runs import write_inventory
from harness.playbooks import playbook
from lab.labctl import Lab


@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp('detection-evidence')
    running = Lab(str(tmp_path / 'lab'))
    running.up(sessions=2)
    try:
        yield write_inventory(running, tmp_path)
    finally:
        running.down()


def untouched(lab):
    """What a repair changes: the gateway process, the cache file, the backups written."""
    backups = sorted(name for _dir, _subdirs, names in os.walk(lab.path('backups')) for name in names)
    return lab._load()['pids']['gateway'], os.stat(lab.cache_path).st_ino, backups


def auto_repair(lab, *extra):
    return playbook(lab.inventory_path, 'dr_detect.yml', '-e', 'vllm_dr_auto_repair=true', *extra)


def test_a_probe_that_races_the_services_own_refresh_repairs_nothing(lab):
    before = untouched(lab)
    lab.fault('race')
    rc, output = auto_repair(lab)
    assert not os.path.exists(lab.path('faults', 'race_next_refresh')), 'the race was not run'
    assert rc == 0, output[-4000:]
    assert 'refresh path healthy: nothing to repair' in output
    assert 'refreshed the probe session while the probe ran' in output
    assert 'repairing (vllm_dr_auto_repair)' not in output and untouched(lab) == before
    assert lab.refresh('s0')[0] == 200 and lab.refresh('svc')[0] == 200


def test_one_transient_invalid_grant_from_the_provider_repairs_nothing(lab):
    before = untouched(lab)
    lab.fault('reject-refresh')
    rc, output = auto_repair(lab)
    assert not os.path.exists(lab.path('idp', 'reject_next_refresh')), 'the provider did not reject'
    assert rc == 0, output[-4000:]
    assert 'refresh path healthy: nothing to repair' in output and 'transient stale_token' in output
    assert 'repairing (vllm_dr_auto_repair)' not in output and untouched(lab) == before
    assert lab.refresh('s0')[0] == 200


def test_only_the_probe_session_revoked_with_the_cache_current_repairs_nothing(lab):
    before = untouched(lab)
    assert lab.revoke('svc')['status'] == 200  # the lab's probe session, the service's own
    assert lab.refresh('svc')[0] == 401
    rc, output = auto_repair(lab)
    assert rc != 0, output[output.find('Show the diagnosis'):][:3000]
    assert 'stale refresh tokens for the probe session only' in output, output[output.find('Show the diagnosis'):][:3000]
    assert 'nothing independent of the probe agrees' in output and 'sign the probe session in again' in output
    assert 'repairing (vllm_dr_auto_repair)' not in output and untouched(lab) == before
    assert lab.refresh('s0')[0] == 200 and lab.refresh('s1')[0] == 200
    # the next run reads the error lines the first one's probes caused: they are about the probe session, not evidence
    rc, output = auto_repair(lab)
    assert rc != 0 and 'stale refresh tokens for the probe session only' in output, output[-4000:]
    assert untouched(lab) == before

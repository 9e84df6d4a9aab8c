"""The suite's own control plane: what it exposes on this machine."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

LOOPBACK = re.compile(r'^(127\.\d+\.\d+\.\d+|\[::1\]|\[::ffff:127\.\d+\.\d+\.\d+\]):\d+$')


def listeners() -> list:
    """(local address:port, pids) of every listening TCP socket on this machine (`ss -ltnp`)."""
    out = subprocess.run(['ss', '-Hltnp'], capture_output=True, text=True, check=True, timeout=30).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        found.append((fields[3], {int(pid) for pid in re.findall(r'pid=(\d+)', line)}))
    return found


def test_the_suite_cluster_listens_on_loopback_only(kube):
    if not kube.owned:
        pytest.skip('the cluster named by KUBECONFIG is not this suite\'s own; its listeners are not ours to judge')
    pids = kube.component_pids()
    assert {'etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kwok-controller'} <= set(pids), pids
    # the controllers open their ports a little after the API server answers: give them a few seconds
    deadline = time.monotonic() + 20
    while True:
        sockets = listeners()
        by_component = {name: [address for address, owners in sockets if pid in owners] for name, pid in pids.items()}
        if all(by_component.values()) or time.monotonic() > deadline:
            break
        time.sleep(1)
    # the cluster's servers were found listening (a test that saw no socket would prove nothing)
    for name in ('etcd', 'kube-apiserver', 'kwok-controller'):
        assert by_component[name], f'{name} (pid {pids[name]}) has no listening socket: {by_component}'
    exposed = {name: [address for address in addresses if not LOOPBACK.match(address)]
               for name, addresses in by_component.items()}
    assert not any(exposed.values()), f'listening beyond loopback: {exposed}'


def test_a_scheduler_that_exits_by_itself_is_started_again_and_pods_are_scheduled(kube, tmp_path):
    """kube-scheduler exits on purpose when its cache no longer matches the API server (a watch gap after the API
    server went away can cause it); the kubelet starts it again in a cluster, the suite's supervisor does here."""
    if not kube.owned:
        pytest.skip('kills a process of the control plane: needs the suite\'s own control plane')
    before = len(kube.component_restarts)
    pid = kube.component_pids()['kube-scheduler']
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while kube.component_pids()['kube-scheduler'] == pid:
        assert time.monotonic() < deadline, 'the scheduler was not started again'
        time.sleep(0.2)
    assert [restart[0] for restart in kube.component_restarts[before:]] == ['kube-scheduler']
    del kube.component_restarts[before:]  # this test's own, not one to report
    why = kube.runs_pods(60)
    assert why == '', f'after the scheduler was started again: {why}'

"""The session-store package: one model type, shared by the sweep and the backup."""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import backup, model, sweep


def test_sweep_and_backup_share_the_one_entry_model():
    assert backup.Entry is model.Entry
    assert sweep.SweepJob.__module__.endswith('_sessions.sweep')
    assert model.Entry.__module__.endswith('_sessions.model')

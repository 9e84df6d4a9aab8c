"""Which error lines of a service log a probe of one session did not cause: lines about other named sessions."""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._log_evidence import scan

LOG = '''2024-07-15T03:12:40Z WARN Token cache not found or corrupted (path=/var/lib/vllm/token_cache.db)
2024-07-15T03:12:47Z ERROR TokenRefreshError: token expired for session 0x1a2b3c
2024-07-15T03:12:48Z WARN Invalid token in session state (session_id=0x1a2b3c)
2024-07-15T03:12:48Z ERROR Failed to refresh token: authentication failed (client_id=svc-vllm)
2024-07-15T03:12:49Z WARN Invalid token in session state (session_id=unknown)
2024-07-15T03:12:49Z ERROR Failed to refresh token: authentication failed (client_id=svc-vllm)
2024-07-15T03:12:51Z ERROR TokenRefreshError: token expired for session svc
2024-07-15T03:12:51Z WARN Invalid token in session state (session_id=svc)
2024-07-15T03:12:51Z ERROR Failed to refresh token: authentication failed (client_id=svc-vllm)
2024-07-15T03:12:52Z INFO Token refreshed for session s1
2024-07-15T03:12:53Z ERROR Failed to refresh token: provider answered 500 (client_id=svc-vllm)
'''


def test_only_lines_about_other_named_sessions_count_beside_the_probe_session():
    found = scan(LOG, session='svc')
    assert found['error_lines'] == 10
    # 0x1a2b3c's three lines; not the start-up line, the unknown session's, the probe's, nor a line after a success
    assert found['other_session_lines'] == 3


def test_the_probe_session_itself_counts_when_another_session_probes():
    assert scan(LOG, session='0x1a2b3c')['other_session_lines'] == 3
    assert scan(LOG)['other_session_lines'] == 6

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # How the session modules read the store: which sessions are chosen, and how fast the store is read
    # (inferops.vllm_dr.vllm_session_sweep and inferops.vllm_dr.vllm_session_info; module_utils/_sessions/reading.py).
    DOCUMENTATION = r"""
options:
  select:
    description:
      - Which sessions are chosen and counted in RV(matched), the ones a sweep removes.
      - V(expired) chooses sessions whose expiry is before O(cutoff) (the incident's C(refresh_on_startup)).
      - V(all) chooses every well-formed session, forcing every client to sign in again.
      - V(revoked) asks the identity provider's RFC 7662 endpoint O(introspection_url) about each session's
        refresh token and chooses only those no longer active, so users whose tokens were not rotated keep
        their sessions. It makes one request per session.
    type: str
    choices: [expired, all, revoked]
    default: expired
  cutoff:
    description:
      - With O(select=expired), the moment before which a session counts as expired; ISO 8601 or epoch seconds.
      - Defaults to now.
    type: str
  expires_field:
    description:
      - The field holding each session's expiry, as ISO 8601 (C(Z), an offset, fractional seconds) or epoch
        seconds or milliseconds.
    type: str
    default: expires_at
  batch_size:
    description:
      - Keys read, judged and (by a sweep) deleted per round trip (per C(SCAN) call, or etcd range page); V(1) to V(100000).
    type: int
    default: 1000
  max_rate:
    description:
      - At most this many entries per second are read, across all cluster primaries. V(0) is unlimited.
    type: float
    default: 0
  introspection_url:
    description:
      - With O(select=revoked), the identity provider's RFC 7662 token introspection endpoint.
    type: str
  introspection_client_id:
    description:
      - Client allowed to introspect tokens (client_secret_basic authentication).
    type: str
  introspection_client_secret:
    description:
      - Secret of O(introspection_client_id).
    type: str
  introspection_validate_certs:
    description:
      - Verify the introspection endpoint's certificate.
    type: bool
    default: true
  introspection_ca_path:
    description:
      - CA bundle for the introspection endpoint.
    type: path
  watched_session:
    description:
      - A session id (for example the refresh probe's session) whose selection is told apart in
        RV(watched_matched), so that a diagnosis can count the sessions to sweep beyond that one.
      - It changes nothing in what is selected or removed.
    type: str
"""

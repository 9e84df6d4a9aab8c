# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The session stores' connection options and factory, kept importable here: they live in _sessions/connection.py.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.connection import (  # noqa: F401  pylint: disable=unused-import
    BACKENDS, MAX_TIMEOUT, SESSION_STORE_RULES, check_store_params, open_store, parse_etcd_endpoint, parse_sentinel_hosts,
    etcd_argument_spec, redis_argument_spec, session_store_argument_spec,
)

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The session stores' error, kept importable here: it lives in _sessions/errors.py.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import (  # noqa: F401  pylint: disable=unused-import
    StoreError, exception_chain, server_words,
)

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Errors of the session stores. Private helper of the inferops.vllm_dr collection."""

from __future__ import annotations


class StoreError(Exception):
    """A session store problem; the message is one line naming the problem and the fix, never a token."""

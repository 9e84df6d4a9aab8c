# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # Options of the etcd backend (backend etcd), each under the etcd_ prefix.
    DOCUMENTATION = r"""
options:
  etcd_endpoints:
    description:
      - With O(backend=etcd), client URLs of etcd members (C(http) or C(https)); the first that answers is used.
        At least one.
    type: list
    elements: str
    default: ['http://127.0.0.1:2379']
  etcd_user:
    description:
      - etcd user for etcd authentication. Its role needs C(read) on O(key_prefix) to report, and C(readwrite)
        to sweep and restore.
    type: str
  etcd_password:
    description:
      - Password of O(etcd_user). Requires O(etcd_user).
    type: str
  etcd_ca_cert:
    description:
      - CA bundle that signed the etcd server certificates.
    type: path
  etcd_client_cert:
    description:
      - Client certificate for etcd.
    type: path
  etcd_client_key:
    description:
      - Key of O(etcd_client_cert). Requires O(etcd_client_cert).
    type: path
"""

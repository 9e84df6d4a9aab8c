# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # Options of the Redis backends (backend redis, redis_sentinel and redis_cluster), named as
    # community.general's Redis modules name them.
    DOCUMENTATION = r"""
options:
  login_host:
    description:
      - Redis host; with V(redis_cluster), any node of the cluster.
    type: str
    default: localhost
  login_port:
    description:
      - Redis port, V(1) to V(65535).
    type: int
    default: 6379
  login_user:
    description:
      - Redis ACL user name (Redis 6 and later).
    type: str
  login_password:
    description:
      - Redis password (of O(login_user), or C(requirepass)).
    type: str
  db:
    description:
      - Redis database number. A cluster has only database V(0).
    type: int
    default: 0
  tls:
    description:
      - Connect to Redis (and the Sentinels) over TLS.
    type: bool
    default: false
  validate_certs:
    description:
      - Verify the Redis server certificate and host name. Turn off only for a lab.
    type: bool
    default: true
  ca_certs:
    description:
      - CA bundle that signed the Redis server certificate.
    type: path
  client_cert_file:
    description:
      - Client certificate for Redis servers that require one.
    type: path
  client_key_file:
    description:
      - Key of O(client_cert_file), when that file does not hold it. Requires O(client_cert_file).
    type: path
  sentinel_hosts:
    description:
      - With O(backend=redis_sentinel) (where it is required), the Sentinels as C(host:port).
      - Every Sentinel that answers is asked for the primary, and they must agree; Sentinels that name
        different primaries under O(sentinel_service_name) are refused. A Sentinel that cannot be reached is
        passed over while another answers.
    type: list
    elements: str
  sentinel_service_name:
    description:
      - With O(backend=redis_sentinel), the name the Sentinels monitor the primary under.
    type: str
    default: mymaster
  sentinel_password:
    description:
      - Password of the Sentinels themselves (their C(requirepass)), when they require one. The primary's
        password is O(login_password).
    type: str
"""

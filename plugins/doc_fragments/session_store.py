# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # Connection and layout options of the vLLM session store, shared by every module that reads sessions.
    DOCUMENTATION = r"""
options:
  backend:
    description:
      - Where the sessions live.
      - V(redis) is one server, V(redis_sentinel) finds the current primary through O(sentinel_hosts),
        V(redis_cluster) works on every primary of a cluster, V(etcd) uses the etcd v3 API.
      - With V(redis_sentinel), every connection must reach the primary the Sentinels name, and every write is
        confirmed with C(WAIT) for the primary's replicas and C(ROLE). A failover that makes a write uncertain
        stops the module with a line naming the old and the new primary; only what the new primary confirms is
        counted.
    type: str
    choices: [redis, redis_sentinel, redis_cluster, etcd]
    default: redis
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
    type: str
  client_cert_file:
    description:
      - Client certificate for Redis servers that require one.
    type: str
  client_key_file:
    description:
      - Key of O(client_cert_file), when that file does not hold it. Requires O(client_cert_file).
    type: str
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
  ca_cert:
    description:
      - CA bundle that signed the etcd server certificates.
    type: path
  client_cert:
    description:
      - Client certificate for etcd.
    type: path
  client_key:
    description:
      - Key of O(client_cert). Requires O(client_cert).
    type: path
  key_pattern:
    description:
      - Redis keys of the sessions, as a C(SCAN MATCH) glob. Each is a hash with C(access_token),
        C(refresh_token) and the expiry field.
      - A pattern without a literal prefix (such as V(*)) is refused.
    type: str
    default: "vllm:session:*"
  key_prefix:
    description:
      - etcd keys of the sessions. Each value is a JSON object with the same fields as the Redis hash.
    type: str
    default: vllm/session/
  timeout:
    description:
      - Seconds to wait for the store on connect and on each call; above V(0), at most V(86400).
      - With O(backend=redis_sentinel), also how long to wait for the Sentinels to agree on a primary after a
        failover, and for the replicas to confirm a write (C(WAIT)).
    type: float
    default: 10.0
requirements:
  - redis (Python library) for the Redis backends; hiredis (Python library) recommended for large Redis stores
  - etcd3gw (Python library) for O(backend=etcd)
"""

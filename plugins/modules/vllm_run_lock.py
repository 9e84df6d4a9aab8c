#!/usr/bin/python

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_run_lock
short_description: Take or give back the lock that lets one recovery run at a time change a target
version_added: 0.2.0
description:
  - A recovery run takes the lock of its target before its first change and gives it back at the end, so that
    two runs (a scheduled one and a manual one) never purge, sweep and restart the same target at once.
  - The lock has an owner (O(owner), the run's identity), the moment it was taken, and a lifetime
    (O(duration)), so the lock of a run that died expires by itself.
  - With O(lock=store) the lock lives in the session store (the same connection options as
    M(inferops.vllm_dr.vllm_session_sweep)). In Redis it is the string key C(vllm_dr:lock:<name>), taken with
    C(SET NX PX); renewed, taken over and deleted by a compare-and-set script, so only the value read is ever
    replaced. In etcd it is the key C(vllm_dr/lock/<name>), bound to an etcd lease of O(duration) seconds and
    created by a transaction that requires it to be absent. The store user needs write access to that key
    (Redis ACL C(+set +get +pttl +evalsha +script|load +unlink); etcd C(readwrite) on C(vllm_dr/lock/)). In Redis
    the compare-and-set script is run once (changing nothing) before the lock is taken; a server where C(EVALSHA)
    or C(SCRIPT) is renamed away (C(rename-command)) or denied is refused in one line naming the command, since a
    lock taken with C(SET NX) alone could be neither renewed, released nor forced.
  - With O(lock=lease) the lock is a C(coordination.k8s.io/v1) Lease named O(name) in O(namespace); its
    C(holderIdentity) is O(owner). It is created (a conflict means another run holds it), renewed and taken over
    by a replace guarded by its C(resourceVersion), and deleted with that C(resourceVersion) as precondition. The
    identity needs C(get), C(create), C(update) and C(delete) on C(leases) in the namespace.
  - A lock another run holds is refused with one line naming its holder, when it was taken and when it expires.
    An expired lock is taken over. O(force=true) takes over, or with O(state=released) removes, a lock another
    run holds when that run stopped renewing it (not renewed for O(stale_after) seconds, it is dead); the lock of a
    run still renewing it is forced only when O(force_holder) names that run.
  - O(state=held) is the check a run makes before each of its changes; it renews the lock (a new lifetime of
    O(duration), and a new renewal time) when O(owner) still holds it, and fails with one line when it does not
    (the lock expired, or another run took it), so that the run stops before that change.
author:
  - inferops SRE (@inferops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.vllm_dr.session_store
  - inferops.vllm_dr.redis
  - inferops.vllm_dr.etcd
attributes:
  check_mode:
    support: full
    details: The lock is read, and what would happen is reported; nothing is written.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  state:
    description:
      - V(acquired) takes the lock, or renews it when O(owner) holds it already (a new lifetime of O(duration)).
      - V(held) renews the lock when O(owner) holds it, and fails when it no longer does (expired or taken over).
      - V(released) deletes the lock when O(owner) holds it; a lock another run holds is left alone (with a
        warning) unless O(force=true).
    type: str
    choices: [acquired, held, released]
    default: acquired
  lock:
    description:
      - Where the lock lives. V(store) is the session store named by the connection options; V(lease) is a
        Kubernetes Lease.
    type: str
    choices: [store, lease]
    default: store
  name:
    description:
      - The lock's name; one lock per target. With O(lock=lease) the Lease's name (a DNS subdomain name).
    type: str
    default: vllm-dr
  namespace:
    description:
      - With O(lock=lease) (where it is required), the namespace of the workload the lock guards.
    type: str
  k8s_auth:
    description:
      - With O(lock=lease), the Kubernetes connection as kubernetes.core's options take it (what the roles call
        C(vllm_dr_k8s_auth)), for example C(kubeconfig) (a path or a dict), C(context), C(host), C(api_key),
        C(validate_certs), C(ca_cert), C(client_cert) and C(client_key). The client is kubernetes.core's own, as for
        its modules; empty uses the C(K8S_AUTH_*) environment variables, the pod's service account inside a cluster,
        or the default kubeconfig.
    type: dict
    default: {}
  owner:
    description:
      - The run's identity, written into the lock, for example C(alice@controller run 5f0c2a81d7e3). Two runs must
        never share one; every host of one run uses the same, so that hosts sharing a store share its lock.
    type: str
    required: true
  duration:
    description:
      - Seconds the lock lasts from the moment it is taken or renewed, V(1) to V(86400). Give more than the whole
        run takes, including the rollout wait; a run that dies keeps others out this long.
    type: int
    default: 1800
  force:
    description:
      - Take over (O(state=acquired)) or remove (O(state=released)) a lock another run holds, when that run has not
        renewed it for O(stale_after) seconds (it is dead), or when O(force_holder) names it. A run that loses its
        lock this way stops before its next change (O(state=held)); the change it is making at that moment finishes.
    type: bool
    default: false
  force_holder:
    description:
      - With O(force=true), the holder (its owner, as the refusal names it) whose lock may be taken although it still
        renews it. Empty forces only the lock of a run that stopped renewing it.
    type: str
    default: ""
  stale_after:
    description:
      - Seconds without renewal after which the holder of a lock counts as dead, so that O(force=true) alone takes
        it. A run renews its lock before each change, so give more than its longest step takes (the rollout wait).
    type: int
    default: 600
  before:
    description:
      - With O(state=held), the change about to be made, named in the failure when the lock is lost.
    type: str
    default: ""
requirements:
  - kubernetes (Python library) and the kubernetes.core collection for O(lock=lease)
seealso:
  - module: inferops.vllm_dr.vllm_session_sweep
"""

EXAMPLES = r"""
- name: Take the run lock in the session store
  inferops.vllm_dr.vllm_run_lock:
    owner: "alice@controller run 5f0c2a81d7e3"
    login_host: redis.internal
    login_password: "{{ vault_redis_password }}"

- name: Take the run lock of a Deployment on Kubernetes
  inferops.vllm_dr.vllm_run_lock:
    lock: lease
    name: vllm-dr-vllm
    namespace: vllm
    k8s_auth:
      kubeconfig: ~/.kube/config
    owner: "alice@controller run 5f0c2a81d7e3"
    duration: 1800

- name: Give it back
  inferops.vllm_dr.vllm_run_lock:
    state: released
    lock: lease
    name: vllm-dr-vllm
    namespace: vllm
    owner: "alice@controller run 5f0c2a81d7e3"

- name: Remove the lock a dead run left (by hand)
  inferops.vllm_dr.vllm_run_lock:
    state: released
    force: true
    lock: lease
    name: vllm-dr-vllm
    namespace: vllm
    owner: "{{ lookup('ansible.builtin.env', 'USER') }} by hand"
"""

RETURN = r"""
action:
  description:
    - What was done, or would be in check mode. V(acquired), V(renewed) (the owner held it already),
      V(taken_over) (it had expired, or O(force=true)), V(released), V(absent) (no lock to release),
      V(held_by_other) (release refused, another run holds it).
  type: str
  returned: success
  sample: acquired
lock:
  description: The lock, in words.
  type: str
  returned: always
  sample: the run lock Lease vllm-dr-vllm in namespace vllm
holder:
  description: Who holds the lock now (null when none), since when and until when (UTC).
  type: dict
  returned: success
  sample: {"owner": "alice@controller run 5f0c2a81d7e3", "acquired_at": "2026-05-04T10:00:00Z",
           "expires_at": "2026-05-04T10:30:00Z"}
previous_holder:
  description: The holder a take over or a release removed, else null.
  type: dict
  returned: success
  sample: {"owner": "bob@controller run 0a1b2c3d4e5f", "acquired_at": "2026-05-04T09:00:00Z",
           "expires_at": "2026-05-04T09:30:00Z"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.vllm_dr.plugins.module_utils._run_lock import (
    LockHeld, acquire, current_time, hold, open_lock, release)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import (
    SESSION_STORE_RULES, session_store_argument_spec)


def argument_spec() -> dict:
    spec = session_store_argument_spec()
    spec.update(
        state=dict(type='str', default='acquired', choices=['acquired', 'held', 'released']),
        lock=dict(type='str', default='store', choices=['store', 'lease']),
        name=dict(type='str', default='vllm-dr'),
        namespace=dict(type='str'),
        k8s_auth=dict(type='dict', default={}, no_log=True),
        owner=dict(type='str', required=True),
        duration=dict(type='int', default=1800),
        force=dict(type='bool', default=False),
        force_holder=dict(type='str', default=''),
        stale_after=dict(type='int', default=600),
        before=dict(type='str', default=''),
    )
    return spec


def module_rules() -> dict:
    rules = {name: (list(rule) if isinstance(rule, list) else dict(rule)) for name, rule in SESSION_STORE_RULES.items()}
    rules['required_if'].append(('lock', 'lease', ('namespace',)))
    return rules


CHANGES = ('acquired', 'taken_over', 'released')


def run(module: AnsibleModule) -> dict:
    params = module.params
    lock, store = open_lock(params)
    try:
        forcing = dict(force=params['force'], stale_after=params['stale_after'], force_holder=params['force_holder'])
        if params['state'] == 'acquired':
            result = acquire(lock, params['owner'], params['duration'], current_time(), check_mode=module.check_mode,
                             **forcing)
        elif params['state'] == 'held':
            result = hold(lock, params['owner'], params['duration'], current_time(), before=params['before'],
                          check_mode=module.check_mode)
        else:
            result = release(lock, params['owner'], current_time(), check_mode=module.check_mode, **forcing)
    finally:
        if store is not None:
            store.close()
    previous = result['previous_holder']
    if params['force'] and previous and previous['owner'] != params['owner']:
        module.warn(f"{result['lock']}: removed the lock of {previous['owner']} (taken {previous['acquired_at']}, "
                    f"expiring {previous['expires_at']}) by force; make sure that run is not working on this target")
    if result['action'] == 'held_by_other':
        module.warn(f"{result['lock']} is held by {result['holder']['owner']} now, not by this run; left alone")
    result['changed'] = result['action'] in CHANGES
    return result


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True, **module_rules())
    try:
        result = run(module)
    except LockHeld as exc:
        module.fail_json(msg=str(exc), lock=exc.where, holder=exc.holder.as_dict())
    except StoreError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()

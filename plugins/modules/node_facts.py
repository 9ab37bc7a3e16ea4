#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Gather a DGX Spark node's facts in one round trip (logic in module_utils/_node_facts.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_facts
short_description: Gather everything a DGX Spark preflight needs about a node, in one round trip
version_added: 0.1.0
description:
  - One task per host reads memory (C(MemTotal), C(MemAvailable)), the kernel (release, page size, command line,
    loaded modules, the NVIDIA driver and memory-saver module), the GPU (identity, memory, driver and clocks from
    one C(nvidia-smi) call), RDMA devices (port state, rate, the GID table with RoCE v2 IPv4 entries), each fabric
    netdev (carrier, speed, MTU, IPv4 addresses) and the IPv4 default routes, the Docker engine (containers with
    names, image IDs, state and labels; images; the serving container in detail), the resource limits of the
    module's process and of C(dockerd) and C(containerd), free disk where the weights live and the mount and
    block devices they (and O(disk_paths)) are stored on, the state of the helper services, the memory guard's
    state and trip (from its files), the listening TCP sockets on the ports asked for with the process and
    container holding each, the existence, type, mode, owner, size and SHA-256 of the O(files) asked for, and a
    manifest of the weights directory (each file's relative name, size and SHA-256, and the KV-relevant keys of
    the model's C(config.json)) - so that a controller can tell from one round trip whether a role would change
    anything on the node, whether every node holds the same weights, and whether the KV cache holds the model.
  - Reads procfs and sysfs directly and runs at most three commands (one C(nvidia-smi --query-gpu), one
    C(systemctl show) for all O(services) and one C(ip -j -4 addr show) for all fabric netdevs); the Docker
    engine is asked over its socket. Gathering takes tens of milliseconds (C(nvidia-smi) itself aside); the
    result reports it in C(elapsed_ms).
  - >-
    C(ports) reads C(/proc/net/tcp) and C(/proc/net/tcp6) and walks C(/proc/<pid>/fd) only when a socket listens
    on one of O(ports); naming another user's process needs root (C(become)), otherwise C(pid) is null and
    C(ports.unreadable_processes) says how many processes could not be read.
  - >-
    A missing tool or device is a fact, not a failure: for example C(gpu.present) is C(false) and C(gpu.error) is
    C(nvidia-smi not found). Read errors that should not happen (permission denied, unreadable output) leave the
    value null and are listed in C(problems). The module fails only on invalid options.
  - On a GB10 (unified memory) C(nvidia-smi) reports GPU memory as C([N/A]); those values are null.
  - >-
    C(weights) hashes within a time budget (O(weights_hash_seconds)) and remembers what it hashed in a cache
    file on the node (O(weights_cache_dir)), so that a second call hashes nothing that did not change; see
    O(weights_hash_seconds) for why the budget, and the section's return value for what is reported.
  - >-
    Read-only but for that cache, which is not written in check mode (it is still read); never reports a
    change.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  sections:
    description:
      - Which parts to gather. Leave out parts a play does not need; C(fabric) reads the RDMA tree as well
        (for the netdev mapping and the GID addresses) but returns only the netdevs.
      - C(memguard), C(ports), C(files), C(releases), C(weights), C(secrets), C(ranks), C(journal) and C(api) are
        gathered only when named (a boot's preflight names them but C(ranks), which a recovery names, and C(api),
        which C(playbooks/status.yml) names on the head).
    type: list
    elements: str
    choices: [memory, kernel, gpu, rdma, fabric, docker, limits, disk, services, memguard, ports, files, releases,
              weights, secrets, ranks, journal, api]
    default: [memory, kernel, gpu, rdma, fabric, docker, limits, disk, services]
  fabric_interfaces:
    description:
      - Netdevs to report under C(fabric.interfaces). A name that does not exist is reported with C(present) false.
      - Default is every netdev that sysfs maps to an RDMA device (C(/sys/class/infiniband/<dev>/device/net/),
        as C(ibdev2netdev) shows them), plus every netdev named like a ConnectX-7 port (C(en*np*)).
    type: list
    elements: str
  weights_path:
    description:
      - Where the model weights live (the profile's C(host.weights_path)). C(disk) reports the free space of the
        file system holding it, or of its nearest existing parent directory when it does not exist yet, and
        (C(disk.mounts)) the mount and block devices it is stored on.
      - C(weights) lists and hashes the files under it (or the one file it names), and returns the KV-relevant
        keys of the model's C(config.json) found there (C(weights.model_configs)).
      - Without it C(disk.path) and C(weights.path) are null and nothing else is reported.
    type: path
  disk_paths:
    description:
      - Absolute paths besides O(weights_path) whose mount and block devices C(disk.mounts) reports (from
        C(/proc/self/mountinfo) and C(/sys/class/block)), such as the directory Engram on disk reads when it is not
        the weights, which seed 002 wants on the node's local NVMe. A relative path fails the module.
    type: list
    elements: str
    default: []
    version_added: 0.1.0
  weights_hash_seconds:
    description:
      - How long C(weights) may spend hashing the files whose hash is not in its cache, smallest first
        (C(config.json), the safetensors index and the tokenizer, which tell revisions apart, come before the
        shards). A file the budget stops halfway is not hashed. Every file keeps its size, which the
        preflight still compares; the next call goes on where this one stopped, so a new copy of the weights
        is hashed over a few preflights, and every later one reads the hashes from the cache.
      - The budget keeps a preflight from hanging on a large model (DeepSeek-V4.1-Flash is about 510 GB in
        48 shards, minutes to read even from NVMe) or on weights behind a network mount. C(0) hashes nothing
        new; a large value (C(3600)) hashes everything once, for example right after copying the weights.
      - C(weights.hashed) reports the files, bytes and seconds this call hashed.
    type: float
    default: 60
    version_added: 0.1.0
  weights_cache_dir:
    description:
      - Where C(weights) keeps the hashes it took, one file per weights directory (C(weights-<digest>.json),
        named by the SHA-256 of the directory's real path), each hash with the file's size and modification
        time (nanoseconds); a file whose size or modification time changed is hashed again.
      - Created 0700 when missing; the cache file is written 0600, atomically, only when it changed, and never
        in check mode. A cache file that is a symlink, owned by another user or writable by others is ignored
        (and reported in C(problems)), since the hashes it holds could hide a changed file. Writing under the
        default needs root (C(become)); a cache that cannot be written is reported in C(problems), and the next
        call hashes again.
      - Empty for no cache.
    type: path
    default: /var/cache/dgxspark-cluster
    version_added: 0.1.0
  services:
    description:
      - systemd units whose C(LoadState), C(ActiveState), C(SubState) and C(UnitFileState) to report (the
        profile's C(host.helper_services)); one C(systemctl show) call for all of them.
    type: list
    elements: str
    default: []
  container_name:
    description:
      - The serving container to report in detail under C(docker.container) (state, image ID, labels, command,
        environment with secret-looking values redacted, limits, mounts). Empty to skip.
    type: str
    default: vllm_dsv41
  ports:
    description:
      - The TCP ports whose listening sockets C(ports) reports (a boot asks for the head's API port and the
        master port). Empty for every listening port, which walks every process's descriptors.
    type: list
    elements: int
    default: []
  files:
    description:
      - Absolute paths whose existence, type, mode, owner, group, size and SHA-256 C(files) reports (the files a
        role writes, to compare with what it would write). Symlinks are followed. A relative path fails the
        module.
      - Regular files larger than 16 MiB, FIFOs, sockets and devices are not read (C(sha256) is null). Reading
        another user's file needs root (C(become)).
    type: list
    elements: str
    default: []
    version_added: 0.1.0
  secret_files:
    description:
      - Absolute paths of secrets' files (the profile's C(container.secrets)) whose existence, type, mode, owner and
        group C(secrets) reports. Only C(stat) is called, following symlinks as Docker's bind does; a file is never
        opened, so nothing of its content, not even its size, leaves the node. A relative path fails the module.
    type: list
    elements: str
    default: []
    version_added: 0.1.0
  memguard_state_path:
    description:
      - The memory guard's state file, rewritten at every sample (phase, trips, last sample, pid).
    type: path
    default: /run/dgxspark-memguard/state.json
  memguard_trip_path:
    description:
      - The memory guard's trip file, kept until the trip is cleared (time, reason, peer, the stop's result).
    type: path
    default: /var/lib/dgxspark-memguard/tripped.json
  releases_dir:
    description: Where C(releases) reads the cluster's releases (the head keeps them; see M(dgxspark.cluster.release)).
    type: path
    default: /var/lib/dgxspark-cluster/releases
  rank_records_dir:
    description:
      - Where C(ranks) reads the records a stop or a boot's undo kept of the ranks it removed (exit code, OOM kill,
        last log lines); the boot role's C(boot_rank_records).
    type: path
    default: /var/log/dgxspark-cluster/ranks
  rank_log_lines:
    description: How many of each rank container's last log lines C(ranks) returns.
    type: int
    default: 20
  journal_path:
    description: The boot's journal on the node, that C(journal) reads (see M(dgxspark.cluster.node_phase)).
    type: path
    default: /var/lib/dgxspark-cluster/boot-journal.json
  memguard_log_path:
    description:
      - The memory guard's decision log; the samples of a trip are read from its trip line (searched in the last
        4 MiB) when neither the state nor the trip holds them.
    type: path
    default: /var/log/dgxspark-memguard/decisions.jsonl
  proc_root:
    description:
      - Where procfs is mounted. Tests point it at a fixture tree.
    type: path
    default: /proc
  sys_root:
    description:
      - Where sysfs is mounted. Tests point it at a fixture tree.
    type: path
    default: /sys
  nvidia_smi:
    description:
      - Path of C(nvidia-smi). Default is the one found on E(PATH) (and the usual system directories).
    type: path
  systemctl:
    description:
      - Path of C(systemctl). Default is the one found on E(PATH).
    type: path
  ip_bin:
    description:
      - Path of iproute2's C(ip), run once (C(ip -j -4 addr show)) for the C(fabric) netdevs' IPv4 addresses.
        Default is the one found on E(PATH) (and the usual system directories).
    type: path
    version_added: 0.1.0
  api_url:
    description:
      - C(api) asks C(GET <api_url>/v1/models) (the profile's API as this node reaches it, such as
        V(http://127.0.0.1:8000) on the head); without it C(api.error) says so.
    type: str
    version_added: 0.2.0
  api_key_file:
    description:
      - A file on the node holding the API's key, sent as C(Authorization) (Bearer); read there, never returned.
    type: path
    version_added: 0.2.0
  api_ca_file:
    description: With an C(https) O(api_url), the PEM file the server's certificate is checked against.
    type: path
    version_added: 0.2.0
  api_smoke:
    description: C(api) also sends one streamed completion of one token (temperature 0) to the first model listed.
    type: bool
    default: false
    version_added: 0.2.0
  timeout:
    description:
      - Seconds each tool (through coreutils C(timeout) when it is installed) and each Docker engine request may
        take. A GPU that does not answer in time is reported as such, not waited for.
    type: int
    default: 20
extends_documentation_fragment:
  - dgxspark.cluster.docker
  - dgxspark.cluster.attributes
attributes:
  check_mode:
    support: full
    description: Runs the same under C(--check), but never writes the C(weights) section's cache of hashes.
  facts:
    support: full
    description: Sets C(ansible_facts.dgxspark_node).
  platform:
    description: Linux nodes (procfs and sysfs); built for DGX Spark (GB10), runs anywhere.
seealso:
  - module: ansible.builtin.setup
notes:
  - >-
    The GPU query is C(nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,compute_cap,pstate,
    memory.total,memory.used,memory.free,clocks.current.graphics,clocks.max.graphics,clocks.current.sm,
    clocks.max.sm,clocks.current.memory,clocks.max.memory,temperature.gpu,power.draw --format=csv,nounits).
  - >-
    RDMA facts come from the files C(show_gids) reads (C(ports/<n>/gids/<i>), C(gid_attrs/types/<i>),
    C(gid_attrs/ndevs/<i>)); unused (all-zero) GID entries are skipped. The index of a RoCE v2 IPv4 entry is
    the value for E(NCCL_IB_GID_INDEX).
  - >-
    The memory-saver module is the patched C(nvidia_uvm) of christopherowen/dgx-spark-memory-saver; it is the
    build that has the C(uvm_pack_sysmem_leaf_tables) parameter, so C(kernel.memory_saver.loaded) means that
    parameter exists under C(/sys/module/nvidia_uvm/parameters/).
  - >-
    Limits: where C(dockerd) runs without the right to raise limits (no CAP_SYS_RESOURCE, as in some
    sandboxes), a container cannot get more than the daemon's hard values (runc fails with C(error setting
    rlimit type 8: operation not permitted) for C(--ulimit memlock=-1)); C(nofile) never exceeds C(nr_open).
  - Reading the Docker socket needs root or the docker group; without it C(docker.error) says so.
  - >-
    C(fabric.interfaces.<name>.ipv4) is null, and C(fabric.error) says why, when C(ip) is missing, fails, does
    not answer in time or prints something that is not iproute2's JSON (that last case is also in C(problems)).
"""

EXAMPLES = r"""
- name: Gather the node's facts
  dgxspark.cluster.node_facts:
    weights_path: /data/models
    services: [ollama.service]

- name: Every node has enough memory available
  ansible.builtin.assert:
    that:
      - dgxspark_node.memory.mem_available_bytes >= 100 * 1024 ** 3
      - "'kho=off' in dgxspark_node.kernel.cmdline"
    fail_msg: "{{ inventory_hostname }}: MemAvailable {{ dgxspark_node.memory.mem_available_bytes }} B"

- name: Only what a quick check needs
  dgxspark.cluster.node_facts:
    sections: [memory, gpu]
  register: quick

- name: Show the GPU's clock (a GB10 latched into a slow clock state shows here)
  ansible.builtin.debug:
    msg: "{{ quick.node.gpu.devices | map(attribute='clocks_graphics_mhz') | list }}"

- name: Is the memory guard tripped, and who holds the API and master ports?
  dgxspark.cluster.node_facts:
    sections: [memguard, ports, docker]
    ports: [8000, 29501]
  register: guard

- name: Show the guard's trip and the ports' holders
  ansible.builtin.debug:
    msg:
      - "{{ guard.node.memguard.tripped }}"
      - "{{ guard.node.ports.listening | map(attribute='comm') | list }}"

- name: Would the role change the node's configuration file?
  dgxspark.cluster.node_facts:
    sections: [files, fabric]
    files: [/etc/dgxspark/fabric.conf, /etc/systemd/system/dgxspark-memguard.service]
  register: current

- name: Show the file's SHA-256 (null when it does not exist) and the fabric ports' addresses
  ansible.builtin.debug:
    msg:
      - "{{ current.node.files.paths['/etc/dgxspark/fabric.conf'].sha256 }}"
      - "{{ current.node.fabric.interfaces | dict2items | map(attribute='value.ipv4') | list }}"

- name: Show the RoCE v2 GID index of every fabric port (NCCL_IB_GID_INDEX)
  ansible.builtin.debug:
    msg: "{{ dgxspark_node.rdma.roce_v2_ipv4 | map(attribute='index') | list }}"
"""

RETURN = r"""
node:
  description:
    - The node's facts (the same as C(ansible_facts.dgxspark_node)). Only the sections asked for are present.
  returned: always
  type: dict
  contains:
    memory:
      description: From /proc/meminfo, in bytes. C(mem_total_bytes), C(mem_available_bytes), C(mem_free_bytes),
        C(swap_total_bytes), C(swap_free_bytes), C(hugepage_size_bytes).
      returned: when asked for
      type: dict
    kernel:
      description:
        - C(release) (C(/proc/sys/kernel/osrelease)), C(page_size) (bytes), C(cmdline) (list of words),
          C(modules) (names from /proc/modules), C(nvidia) (C(version), C(uvm_loaded), C(uvm_srcversion) from
          /sys/module) and C(memory_saver) (C(loaded), C(packing_enabled)).
      returned: when asked for
      type: dict
    gpu:
      description:
        - C(present), C(error), C(count) and C(devices), each with C(index), C(name), C(uuid), C(pci_bus_id),
          C(driver_version), C(compute_cap), C(pstate), C(memory_total_mib), C(memory_used_mib),
          C(memory_free_mib), C(clocks_graphics_mhz), C(clocks_max_graphics_mhz), C(clocks_sm_mhz),
          C(clocks_max_sm_mhz), C(clocks_memory_mhz), C(clocks_max_memory_mhz), C(temperature_c),
          C(power_draw_w). A value nvidia-smi cannot give (GB10 memory) is null.
      returned: when asked for
      type: dict
      sample:
        present: true
        error: null
        count: 1
        devices:
          - {index: 0, name: NVIDIA GB10, memory_total_mib: null, clocks_graphics_mhz: 2522, power_draw_w: 15.57}
    rdma:
      description:
        - C(present), C(error), C(devices) (by name, each with C(node_guid), C(fw_ver), C(hca_type), C(board_id),
          C(netdevs) and C(ports); a port has C(port), C(state), C(state_code), C(phys_state), C(link_layer),
          C(rate), C(rate_gbps) and C(gids), each with C(index), C(gid), C(ipv4), C(type), C(roce_version),
          C(netdev)), and C(roce_v2_ipv4) (C(device), C(port), C(index), C(ipv4), C(netdev) of every RoCE v2 IPv4
          GID).
      returned: when asked for
      type: dict
    fabric:
      description:
        - C(interfaces), by netdev name, each with C(present), C(operstate), C(carrier) (bool), C(speed_mbps)
          (null when the link is down), C(mtu), C(address), C(rdma_device), C(gid_ipv4) (the IPv4 addresses of
          its RoCE v2 GIDs) and C(ipv4) (its IPv4 addresses with prefix length, in C(ip)'s order, from one
          C(ip -j -4 addr show); empty when it has none, null when C(ip) could not tell).
        - C(error), why C(ipv4) is null (C(ip) not found, exited non-zero, timed out, unreadable output); null
          otherwise.
        - C(default_routes), the IPv4 default routes of the main routing table (from C(/proc/net/route)), the one
          the kernel prefers (lowest metric) first, each with C(interface), C(gateway) and C(metric); empty when
          there is none, null when the file cannot be read. A preflight compares them with the planned fabric
          ports (a fabric port must not be the management interface).
        - C(addresses), every interface's IPv4 addresses with prefix length, by name, from the same C(ip) call (null
          when C(ip) could not tell); a preflight reads the management interface's subnet there (no fabric address
          may be inside a management subnet).
      returned: when asked for
      type: dict
      sample:
        error: null
        default_routes:
          - {interface: wlP9s9, gateway: 192.168.10.254, metric: 600}
        addresses:
          wlP9s9: [192.168.10.21/24]
          enp1s0f0np0: [192.168.100.10/24]
        interfaces:
          enp1s0f0np0: {present: true, operstate: up, carrier: true, speed_mbps: 200000, mtu: 9000,
                        address: "30:c5:99:3e:6a:13", rdma_device: rocep1s0f0, gid_ipv4: [192.168.100.10],
                        ipv4: [192.168.100.10/24]}
    docker:
      description:
        - C(present) (the engine answered), C(error), C(socket), C(engine) (C(version), C(api_version), C(os),
          C(arch), C(kernel_version)), C(containers) (C(name), C(id), C(image), C(image_id), C(state), C(status),
          C(created), C(labels)), C(images) (C(id), C(tags), C(digests), C(created), C(size), C(labels)) and
          C(container), the serving container (C(exists) false, or its C(state), C(image_id), C(labels), C(env),
          C(ulimits), C(mounts), ...).
        - C(runtimes) (the engine's container runtimes by name, from C(/info); null when it does not say),
          C(default_runtime), and C(gpu_hook) (the path of the NVIDIA Container Toolkit's
          C(nvidia-container-runtime-hook), null when not found) - whether C(--gpus) can work there (C(window.yml)).
      returned: when asked for
      type: dict
    limits:
      description:
        - C(nr_open) (/proc/sys/fs/nr_open), and C(module), C(dockerd), C(containerd) (null when not running,
          else with C(pid)), each with C(nofile), C(memlock), C(stack) and C(core) as C({soft, hard}); -1 is
          unlimited.
        - C(dockerd) and C(containerd) also have C(cap_sys_resource) (from C(CapEff) in /proc/<pid>/status; null
          when unreadable) - whether the daemon may give a container limits above its own, as root's dockerd on a
          Spark can and a daemon in an unprivileged container cannot.
      returned: when asked for
      type: dict
    disk:
      description:
        - C(path) (O(weights_path)), C(exists), C(checked_path), C(total_bytes), C(free_bytes),
          C(available_bytes) (what an unprivileged writer can use) and C(read_only).
        - >-
          C(mounts), by path (O(weights_path) and each of O(disk_paths)), where each is stored: C(path),
          C(resolved) (its real path), C(mount_point), C(fstype), C(source) and C(major_minor) of the mount holding
          it (the longest mount point in C(/proc/self/mountinfo), the last of equal ones), C(device) (the kernel's
          name of that block device, such as C(nvme0n1p2) or C(dm-0)), C(disks) (the whole disks under it,
          through a partition's disk and a device-mapper or md device's C(slaves), each with C(name), C(nvme),
          C(transport) (an NVMe controller's: C(pcie) for a local SSD; C(tcp), C(rdma), C(fc) for NVMe over
          Fabrics), C(model), C(rotational) and C(removable)), C(via) (for an overlay mount, the layer it was
          judged by), C(kind) (C(block), C(network) such as nfs or cifs, C(memory) such as tmpfs, C(overlay)
          without a local device, or C(unknown)) and C(error) (why the mount could not be found).
      returned: when asked for
      type: dict
      sample:
        path: /models
        exists: true
        mounts:
          /models:
            path: /models
            resolved: /models
            mount_point: /
            fstype: ext4
            source: /dev/nvme0n1p2
            major_minor: "259:2"
            device: nvme0n1p2
            disks:
              - {name: nvme0n1, nvme: true, transport: pcie, model: "ESL04TBTLCZ-27J2-TYN", rotational: false,
                 removable: false}
            via: null
            kind: block
            error: null
    services:
      description:
        - C(present) (systemctl answered; null when no unit was asked for), C(error) and C(units), by name, each
          with C(id), C(load_state), C(active_state), C(sub_state), C(unit_file_state), C(result) (why it last
          stopped, such as success, exit-code, watchdog or start-limit-hit) and C(restarts) (systemd's NRestarts).
      returned: when asked for
      type: dict
    memguard:
      description:
        - The memory guard, read from its files (never asked). C(installed) (its state or trip file exists),
          C(running) (the state's C(pid) is alive and the state is no older than its C(health.stale_after_s), 30 s
          when it has none; null without a state file), C(pid), C(phase), C(startup_overdue) (the last load's
          startup phase ran over its wait), C(startup_seconds) (how long it ran), C(trips), C(updated_utc),
          C(state_age_s), C(last_sample), C(mem_available_min) (the lowest MemAvailable since the last load's startup
          phase began or, before any, since the guard started - C(bytes), C(t), C(since); null from an older guard),
          C(last_decision) (C(decision), C(time), C(phase), C(reason); null before any), C(floor_bytes) (the
          current phase's floor; null in idle), C(health) (the guard's own C(ok), C(problems),
          C(write_errors), C(watchdog_s), C(stale_after_s), C(started); null from a guard that writes none),
          C(peers) (C(listening) and C(listen_error) of its peer listener, null with none; C(rejections), the
          connections refused; C(clock_skew), a peer's trip refused for its date),
          C(state_path), C(trip_path) and C(tripped) - null, or C(time) (epoch seconds), C(time_utc), C(reason),
          C(from_peer) (the peer whose trip stopped this rank), C(stop) (what the stop did), C(stop_all) (a local
          trip's message to the peers, with C(done), C(ok), C(acknowledged), C(not_acknowledged) with each peer's
          C(host), C(error) and C(tries); null for a peer's trip) and C(samples) (the
          samples recorded with the trip, each C(t), C(mem_available), C(psi_full_avg10), C(low), from the state,
          the trip file, or the decision log and its rotated C(.1); null when not found).
      returned: when asked for
      type: dict
      sample:
        installed: true
        running: true
        phase: steady
        trips: 1
        tripped:
          time: 1796106603.5
          time_utc: "2026-12-01T06:30:03Z"
          reason: "MemAvailable under the steady floor 3.00 GiB (last 2.50 GiB) for 30.00 s (grace 30 s, phase steady)"
          from_peer: null
          stop_all: {done: true, ok: true, acknowledged: [spark-w1, spark-w2], not_acknowledged: []}
          samples: [{t: 1796106601.5, mem_available: 2684354560, psi_full_avg10: null, low: true}]
    ports:
      description:
        - C(asked) (O(ports), null for all), C(unreadable_processes) and C(listening), one entry per listening
          socket (by port, family, address) with C(port), C(family) (ipv4, ipv6), C(address), C(inode), C(uid),
          C(pids) (every process holding it), C(pid), C(comm) and C(container) (the lowest of those pids, its
          name and the ID of the container it runs in, from its cgroup; null when unknown or on the host) and
          C(container_name) (when the C(docker) section lists that container).
      returned: when asked for
      type: dict
      sample:
        asked: [8000, 29501]
        unreadable_processes: 0
        listening:
          - {port: 8000, family: ipv4, address: 0.0.0.0, inode: 10550, uid: 0, pids: [4242], pid: 4242,
             comm: python3, container: null, container_name: null}
    releases:
      description:
        - The cluster's releases kept in O(releases_dir) (on the head; elsewhere C(present) is false and the list
          empty), as M(dgxspark.cluster.release) lists them - C(releases) (each one's summary), C(promoted),
          C(previous), C(protected_images), C(problems) (files that are not releases), C(directory), C(present).
      returned: when asked for
      type: dict
    ranks:
      description:
        - >-
          The collection's rank containers on the node, found by their C(dgxspark.cluster.rank) label whatever the
          profile says: C(containers), a record each (C(name), C(id), C(image), C(image_id), C(rank), C(shape),
          C(spec_sha256), C(running), C(status), C(exit_code), C(oom_killed), C(restart_count), C(started_at),
          C(finished_at),
          C(log_tail) with the last O(rank_log_lines) lines); C(records), the newest record a stop or a boot's
          undo saved in O(rank_records_dir) for each rank name (the same keys, and its C(path)), newest first;
          C(problems) (record files that could not be read); C(error) (why the Docker engine could not be asked).
      returned: when asked for
      type: dict
      sample:
        error: null
        containers:
          - {name: vllm_dsv41, rank: "1", running: false, status: exited, exit_code: 137, oom_killed: false,
             log_tail: ["(RayWorker) CUDA error: out of memory"]}
        records: []
        problems: []
    api:
      description:
        - >-
          The OpenAI API as the node reaches O(api_url): C(url), C(answered) (HTTP 200 and a model list on
          C(/v1/models)), C(status), C(models) (their ids), C(seconds), C(error) (why it did not answer) and
          C(smoke) (with O(api_smoke): C(ok), C(ttft), C(e2e), C(output_tokens), C(error); else null).
      returned: when asked for
      type: dict
      sample:
        url: http://127.0.0.1:8000
        answered: true
        status: 200
        models: [deepseek-v4.1-flash]
        seconds: 0.004
        error: null
        smoke: null
    journal:
      description:
        - >-
          The boot's journal on the node (O(journal_path)), left by a boot that did not finish (its controller died):
          C(open) (a journal is there, readable or not), C(entry) (what that boot paused, armed and started -
          C(helpers), C(guard_phase), C(rank), C(opened_at), C(updated_at), C(by)), C(error) (why it could not be
          read), C(path).
      returned: when asked for
      type: dict
      sample:
        path: /var/lib/dgxspark-cluster/boot-journal.json
        open: true
        entry: {helpers: [comfyui.service], guard_phase: startup, rank: vllm_dsv41, opened_at: "2026-12-02T03:00:00Z",
                updated_at: "2026-12-02T03:00:00Z", by: ops@controller}
        error: null
    files:
      description:
        - >-
          C(paths), by path as given in O(files), each with C(exists), C(type) (C(file), C(directory), C(fifo),
          C(socket), C(char_device), C(block_device); of the target for a symlink), C(sha256) (hex, regular
          files of at most 16 MiB only), C(mode) (octal string such as C(0644)), C(owner) (uid), C(group) (gid),
          C(size) (bytes) and C(error) (why C(sha256) is null for a regular file, such as C(Permission denied)
          or C(larger than 16 MiB (...): not hashed), or that a symlink's target is missing; else null).
        - A missing path has C(exists) false and every other value null (but C(error) for a symlink whose target
          is missing). C(exists) is null only when stat fails otherwise (a parent directory that cannot be
          searched); such errors and unreadable files are also in C(problems).
      returned: when asked for
      type: dict
      sample:
        paths:
          /etc/hosts: {exists: true, type: file, mode: "0644", owner: 0, group: 0, size: 221, error: null,
                       sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
          /etc/dgxspark: {exists: true, type: directory, sha256: null, mode: "0755", owner: 0, group: 0,
                          size: 4096, error: null}
          /etc/absent.conf: {exists: false, type: null, sha256: null, mode: null, owner: null, group: null,
                             size: null, error: null}
    weights:
      description:
        - >-
          The manifest of O(weights_path) (the directory's files, or the one file it names): C(path), C(root) (its
          real path), C(exists), C(error) (why there is no usable manifest: more than 10000 files, which is not
          a model directory, a directory that cannot be listed, or a path that is neither a directory nor a
          file; else null), C(files) (by name
          relative to C(root), each with C(size) in bytes and C(sha256), null when not hashed), C(file_count),
          C(total_bytes), C(complete) (every file hashed), C(truncated) (the walk stopped at 10000 files and
          nothing was hashed), C(from_cache) (files whose hash came from the cache), C(not_hashed), C(hashed)
          (C(files), C(bytes) and C(seconds) hashed by this call), C(budget_seconds) and C(cache) (C(path),
          C(read), C(written), C(error)).
        - Names starting with C(.) are left out (download tools' state such as C(.cache/huggingface/), which
          differs from node to node, and copies in progress); a symlinked file is followed, a symlinked
          directory is not (reported in C(problems), as are unreadable files).
        - >-
          C(model_configs): the model's C(config.json) at the top of O(weights_path) and in each of its first 64
          subdirectories, by path relative to C(root), each with C(size), C(keys) (only what a KV-cache size
          depends on: the layers, attention and KV heads, head and latent dimensions, dtype, sliding window and
          layer types, the maximum positions, the markers of attention the preflight does not model such as
          C(compress_ratios), and the same keys of a C(text_config); each a scalar, a list of at most 4096
          scalars or a mapping of those), C(skipped) (keys left out as too large) and C(error) (a file over 1 MiB,
          unreadable, or not a JSON object: also in C(problems)). Never the whole file.
        - Only C(path) (null) when O(weights_path) is not given.
      returned: when asked for
      type: dict
      sample:
        path: /models
        root: /models
        exists: true
        error: null
        files:
          DeepSeek-V4.1-Flash/config.json:
            size: 1843
            sha256: 5980de4430edf61dba810eed62e28aa82c7d058230d24fd4f64beacd92249068
          DeepSeek-V4.1-Flash/model-00001-of-00048.safetensors: {size: 10737418240, sha256: null}
        model_configs:
          DeepSeek-V4.1-Flash/config.json:
            size: 1843
            keys: {architectures: [DeepseekV4ForCausalLM], num_hidden_layers: 43, num_key_value_heads: 1,
                   head_dim: 512, compress_ratios: [0, 0, 4, 128]}
            skipped: []
            error: null
        file_count: 2
        total_bytes: 10737420083
        complete: false
        truncated: false
        from_cache: 1
        not_hashed: 1
        hashed: {files: 0, bytes: 0, seconds: 0.0}
        budget_seconds: 0.0
        cache: {path: /var/cache/dgxspark-cluster/weights-0c6b2f3b6f1a9d27.json, read: true, written: false,
                error: null}
    secrets:
      description:
        - C(uid), the user this module runs as (root under C(become), else the SSH user), and C(paths), by path as
          given in O(secret_files), each with C(exists), C(type) (as in C(files)), C(mode) (octal string),
          C(owner) (uid), C(group) (gid) and C(error) (why C(stat) failed otherwise than "not there"; such errors
          are also in C(problems)). From C(stat) alone; no content, hash or size.
      returned: when asked for
      type: dict
      sample:
        uid: 0
        paths:
          /etc/dgxspark/secrets/hf_token: {exists: true, type: file, mode: "0600", owner: 0, group: 0, error: null}
    sections:
      description: The sections gathered.
      returned: always
      type: list
      elements: str
    problems:
      description: Read errors that left a value null, each with C(section), C(source) and C(message).
      returned: always
      type: list
      elements: dict
    elapsed_ms:
      description: Time spent gathering, in milliseconds.
      returned: always
      type: float
ansible_facts:
  description: The same facts for later tasks.
  returned: always
  type: dict
  contains:
    dgxspark_node:
      description: See RV(node).
      returned: always
      type: dict
elapsed_ms:
  description: Time spent gathering, in milliseconds.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_module import DOCKER_HOST
from ansible_collections.dgxspark.cluster.plugins.module_utils._files import relative_paths
from ansible_collections.dgxspark.cluster.plugins.module_utils._memguard_state import (
    DEFAULT_LOG_PATH,
    DEFAULT_STATE_PATH,
    DEFAULT_TRIP_PATH,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import (
    DEFAULT_CONTAINER_NAME,
    DEFAULT_JOURNAL_PATH,
    DEFAULT_RANK_RECORDS_DIR,
    DEFAULT_SECTIONS,
    SECTIONS,
    Options,
    Tool,
    gather,
    make_runner,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._releases import (
    DEFAULT_DIRECTORY as DEFAULT_RELEASES_DIR,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._weights_manifest import (
    DEFAULT_CACHE_DIR as DEFAULT_WEIGHTS_CACHE_DIR,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._weights_manifest import DEFAULT_HASH_SECONDS

ARGUMENT_SPEC = {
    "sections": {
        "type": "list",
        "elements": "str",
        "choices": list(SECTIONS),
        "default": list(DEFAULT_SECTIONS),
    },
    "fabric_interfaces": {"type": "list", "elements": "str"},
    "weights_path": {"type": "path"},
    "disk_paths": {"type": "list", "elements": "str", "default": []},
    "services": {"type": "list", "elements": "str", "default": []},
    "container_name": {"type": "str", "default": DEFAULT_CONTAINER_NAME},
    **DOCKER_HOST,
    "proc_root": {"type": "path", "default": "/proc"},
    "sys_root": {"type": "path", "default": "/sys"},
    "nvidia_smi": {"type": "path"},
    "systemctl": {"type": "path"},
    "ip_bin": {"type": "path"},
    "timeout": {"type": "int", "default": 20},
    "ports": {"type": "list", "elements": "int", "default": []},
    "files": {"type": "list", "elements": "str", "default": []},
    # paths of the secrets' files, not secrets: node_facts never reads them
    "secret_files": {"type": "list", "elements": "str", "default": [], "no_log": False},
    "memguard_state_path": {"type": "path", "default": DEFAULT_STATE_PATH},
    "memguard_trip_path": {"type": "path", "default": DEFAULT_TRIP_PATH},
    "memguard_log_path": {"type": "path", "default": DEFAULT_LOG_PATH},
    "releases_dir": {"type": "path", "default": DEFAULT_RELEASES_DIR},
    "rank_records_dir": {"type": "path", "default": DEFAULT_RANK_RECORDS_DIR},
    "rank_log_lines": {"type": "int", "default": 20},
    "journal_path": {"type": "path", "default": DEFAULT_JOURNAL_PATH},
    "api_url": {"type": "str"},
    "api_key_file": {"type": "path", "no_log": False},
    "api_ca_file": {"type": "path"},
    "api_smoke": {"type": "bool", "default": False},
    "weights_hash_seconds": {"type": "float", "default": DEFAULT_HASH_SECONDS},
    "weights_cache_dir": {"type": "path", "default": DEFAULT_WEIGHTS_CACHE_DIR},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if params["timeout"] <= 0:
        module.fail_json(msg=f"timeout must be a positive number of seconds, found {params['timeout']}")
    bad_ports = [port for port in params["ports"] if not 0 < port < 65536]
    if bad_ports:
        module.fail_json(msg=f"ports must be TCP ports (1-65535), found {bad_ports}")
    if params["rank_log_lines"] < 0:
        module.fail_json(msg=f"rank_log_lines must be 0 or more lines, found {params['rank_log_lines']}")
    if params["weights_hash_seconds"] < 0:
        module.fail_json(msg=f"weights_hash_seconds must be 0 or more seconds, found {params['weights_hash_seconds']}")
    relative = relative_paths(params["files"])
    if relative:
        module.fail_json(msg=f"files must be absolute paths, found {relative}")
    relative = relative_paths(params["disk_paths"])
    if relative:
        module.fail_json(msg=f"disk_paths must be absolute paths, found {relative}")
    relative = relative_paths(params["secret_files"])
    if relative:
        module.fail_json(msg=f"secret_files must be absolute paths, found {relative}")
    wanted = set(params["sections"])

    def tool(name: str, option: str, section: str) -> Tool:
        if section not in wanted:
            return Tool(name, None, f"{name} not looked for")
        found = None if params[option] else module.get_bin_path(name)
        return Tool.resolve(name, params[option], found)

    options = Options(
        sections=tuple(s for s in SECTIONS if s in wanted),
        proc_root=params["proc_root"],
        sys_root=params["sys_root"],
        nvidia_smi=tool("nvidia-smi", "nvidia_smi", "gpu"),
        systemctl=tool("systemctl", "systemctl", "services") if params["services"] else Tool("systemctl", None),
        ip=tool("ip", "ip_bin", "fabric"),
        docker_host=params["docker_host"],
        container_name=params["container_name"] or None,
        fabric_interfaces=tuple(params["fabric_interfaces"]) if params["fabric_interfaces"] is not None else None,
        weights_path=params["weights_path"],
        disk_paths=tuple(params["disk_paths"]),
        services=tuple(params["services"]),
        timeout=float(params["timeout"]),
        memguard_state_path=params["memguard_state_path"],
        memguard_trip_path=params["memguard_trip_path"],
        memguard_log_path=params["memguard_log_path"],
        ports=tuple(params["ports"]),
        files=tuple(params["files"]),
        releases_dir=params["releases_dir"],
        rank_records_dir=params["rank_records_dir"] or "",
        rank_log_lines=params["rank_log_lines"],
        journal_path=params["journal_path"],
        api_url=params["api_url"],
        api_key_file=params["api_key_file"],
        api_ca_file=params["api_ca_file"],
        api_smoke=params["api_smoke"],
        weights_cache_dir=params["weights_cache_dir"] or "",
        weights_hash_seconds=float(params["weights_hash_seconds"]),
        write_cache=not module.check_mode,
        secret_files=tuple(params["secret_files"]),
    )

    def run_command(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv, handle_exceptions=False, errors="surrogate_then_replace")

    needs_process = any(t.path is not None for t in (options.nvidia_smi, options.systemctl, options.ip))
    timeout_bin = module.get_bin_path("timeout") if needs_process else None
    node = gather(options, make_runner(run_command, timeout_bin, options.timeout))
    module.exit_json(changed=False, node=node, ansible_facts={"dgxspark_node": node}, elapsed_ms=node["elapsed_ms"])


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Configure a freshly debootstrapped node rootfs (runs on the build machine, not in a chroot).
#
# Usage: sim/node/configure.sh ROOTFS
#
# Called by sim/images/rootfs.sh after the files under sim/node/rootfs/ were copied in. Part of the
# node image's inputs: changing it rebuilds the image.
set -euo pipefail
rootfs=${1:?usage: $0 ROOTFS}
[[ -d $rootfs/etc/systemd ]] || { echo "configure: $rootfs is not a systemd rootfs" >&2; exit 1; }

mask() { for unit in "$@"; do ln -sfn /dev/null "$rootfs/etc/systemd/system/$unit"; done; }

# systemd runs as PID 1 in a container: nothing that wants a console, hardware, the kernel's
# tunables or periodic maintenance. What is left: journald, dbus, logind, sshd, containerd, dockerd.
mask getty.target console-getty.service getty@tty1.service serial-getty@.service \
    systemd-udevd.service systemd-udev-trigger.service systemd-udev-settle.service \
    systemd-modules-load.service kmod-static-nodes.service systemd-sysctl.service \
    systemd-remount-fs.service systemd-firstboot.service systemd-random-seed.service \
    systemd-hwdb-update.service systemd-journald-audit.socket systemd-pstore.service \
    sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount \
    sys-fs-fuse-connections.mount dev-hugepages.mount proc-sys-fs-binfmt_misc.automount \
    apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer fstrim.timer \
    e2scrub_all.timer e2scrub_reap.service

# The services the node is for, enabled as on a real Spark (node_exporter as an operator who monitors it installs it).
wants=$rootfs/etc/systemd/system/multi-user.target.wants
mkdir -p "$wants"
for unit in ssh.service docker.service containerd.service prometheus-node-exporter.service; do
    src=$(find "$rootfs/lib/systemd/system" "$rootfs/usr/lib/systemd/system" -maxdepth 1 -name "$unit" 2>/dev/null | head -1)
    [[ -n $src ]] || { echo "configure: unit $unit not found in $rootfs" >&2; exit 1; }
    ln -sfn "${src#"$rootfs"}" "$wants/$unit"
done
ln -sfn /lib/systemd/system/multi-user.target "$rootfs/etc/systemd/system/default.target"
# The stand-in helper service the sim profiles name (sim/node/rootfs/etc/systemd/system/).
ln -sfn /etc/systemd/system/dgxspark-sim-helper.service "$wants/dgxspark-sim-helper.service"

# Per-node identity comes at boot: machine-id (systemd makes a fresh one when the file is empty),
# SSH host keys (ssh.service drop-in), hostname and /etc/hosts (docker run --hostname).
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id" "$rootfs/etc/hostname"
ln -sfn /etc/machine-id "$rootfs/var/lib/dbus/machine-id"
rm -f "$rootfs"/etc/ssh/ssh_host_*

# root logs in with the cluster's key (bind-mounted to /root/.ssh/authorized_keys by sim-up).
install -d -m 0700 "$rootfs/root/.ssh"
# A login that is not root, as on a real Spark (its inventories connect as nvidia): "spark", uid 1000, with
# password-less sudo and the same key (bind-mounted to /home/spark/.ssh/authorized_keys by sim-up). Not in the
# docker group: the collection's become is what reaches the engine (the sim test of a non-root boot).
grep -q '^spark:' "$rootfs/etc/group" || echo 'spark:x:1000:' >>"$rootfs/etc/group"
grep -q '^spark:' "$rootfs/etc/passwd" || echo 'spark:x:1000:1000:spark:/home/spark:/bin/bash' >>"$rootfs/etc/passwd"
grep -q '^spark:' "$rootfs/etc/shadow" || echo 'spark:*:20000:0:99999:7:::' >>"$rootfs/etc/shadow"
install -d -m 0755 -o 1000 -g 1000 "$rootfs/home/spark"
install -d -m 0700 -o 1000 -g 1000 "$rootfs/home/spark/.ssh"
install -d -m 0750 "$rootfs/etc/sudoers.d"
printf 'spark ALL=(ALL:ALL) NOPASSWD: ALL\n' >"$rootfs/etc/sudoers.d/spark"
chmod 0440 "$rootfs/etc/sudoers.d/spark"
# The inner dockerd keeps its images on a volume sim-up mounts here (overlay2 driver: the volume is the
# host's ext4, not an overlay, so overlay mounts work inside the node as on a Spark).
install -d -m 0710 "$rootfs/var/lib/docker"
install -d -m 0755 "$rootfs/etc/dgxspark-sim"

#!/usr/bin/env bash
# Build (or find in the cache) the simulated cluster's images, offline.
#
# Usage: sim/images/build.sh [all|node|python|engine|ee-base]      (default: all)
#
#   dgxspark-sim/node:<hash>    Debian bookworm minbase + systemd, sshd, docker.io (overlay2), python3...
#                               (sim/node/), imported with `docker import`: boots systemd as PID 1.
#   dgxspark-sim/python:<hash>  Debian bookworm minbase + python3 (sim/images/python/).
#   dgxspark-sim/engine:<hash>  FROM the python image: sim/engine/ (the `vllm serve` stand-in) and
#                               plugins/plugin_utils/profile/vllm_serve_args.py, `vllm` on PATH; also
#                               tagged :latest (the sim profiles' container.image). Saved as a tar
#                               that sim-up loads into every node's inner dockerd.
#   dgxspark-ee/base:<hash>     not part of `all`: the execution environment's base image (make ee-image,
#                               tools/packaging/ee_image.py), Debian *trixie* minbase + python3, venv, pip
#                               (from Debian's wheel), openssh-client (sim/images/ee-base/); also tagged :trixie, the name
#                               execution-environment.yml gives it. Prints EE_BASE_IMAGE=... only.
#
# <hash> is a digest of the image's inputs (package list, build scripts, copied files), so an image
# is rebuilt only when they change; the rootfs tarballs, the engine tar and debootstrap's .debs stay
# in SIM_CACHE (default <repo>/.cache/sim) and an image already tagged is not built again.
# Prints the result as shell assignments on stdout (also written to $SIM_CACHE/images/current.env,
# but for ee-base):
#   SIM_NODE_IMAGE=... SIM_PYTHON_IMAGE=... SIM_ENGINE_IMAGE=... SIM_ENGINE_TAR=...
# Progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${SIM_CACHE:-$repo/.cache/sim}
images=$cache/images
suite=${DEBIAN_SUITE:-bookworm}
what=${1:-all}
export DOCKER_BUILDKIT=0 # the classic builder: a local FROM image, never a pull

say() { printf 'sim-images: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

case $what in all | node | python | engine | ee-base) ;; *) die "unknown image '$what' (all, node, python, engine, ee-base)" ;; esac
mkdir -p "$images"
"$repo/sim/cluster/ensure-docker.sh"

# One build at a time per cache (tests, bench and make may race).
exec 8>"$images/.lock"
flock -w 1800 8 || die "timed out waiting for another build (lock $images/.lock)"

# digest PATH...: a short digest of the contents and names (relative to the repo) of the files
# under each PATH, plus the Debian suite (DIGEST_SUITE, default $suite). Bytecode caches do not count.
digest() {
    (
        cd "$repo"
        printf 'suite=%s\n' "${DIGEST_SUITE:-$suite}"
        for path in "$@"; do
            find "$path" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*/.pytest_cache/*' -print0
        done | sort -z | xargs -0 sha256sum | sed "s|  $repo/|  |"
    ) | sha256sum | cut -c1-12
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# prune KIND KEEP_HASH [REPOSITORY [STABLE_TAG]]: drop the cached tarballs and images of KIND from older
# inputs (an image still used by a container stays). REPOSITORY: dgxspark-sim/KIND unless given; its
# STABLE_TAG (latest unless given) stays.
prune() {
    local kind=$1 keep=$2 repository=${3:-dgxspark-sim/$1} stable=${4:-latest} file tag
    for file in "$images/$kind"-*.tar; do
        [[ -e $file && $file != "$images/$kind-$keep.tar" ]] && rm -f "$file"
    done
    while read -r tag; do
        if [[ -n $tag && $tag != "$repository:$keep" && $tag != "$repository:$stable" ]]; then
            docker rmi "$tag" >/dev/null 2>&1 || true
        fi
    done < <(docker images --format '{{.Repository}}:{{.Tag}}' "$repository")
}

# rootfs_image KIND HASH PACKAGES [OVERLAY CONFIGURE] -- docker-import options follow after --
# The image is IMAGE_REPOSITORY:HASH (default dgxspark-sim/KIND), its rootfs of Debian IMAGE_SUITE
# (default $suite), its .debs cached in IMAGE_DEB_CACHE (default rootfs.sh's, $SIM_CACHE/debs).
rootfs_image() {
    local kind=$1 hash=$2 packages=$3 overlay=$4 configure=$5
    shift 5
    local repository=${IMAGE_REPOSITORY:-dgxspark-sim/$kind} image_suite=${IMAGE_SUITE:-$suite}
    local tag=$repository:$hash tar=$images/$kind-$hash.tar start=$SECONDS
    if image_exists "$tag"; then
        say "$tag: present (inputs unchanged)"
        return
    fi
    if [[ -f $tar ]]; then
        say "$tag: rootfs tarball cached ($tar)"
    else
        say "$tag: building the rootfs (Debian $image_suite)"
        DEBIAN_SUITE=$image_suite SIM_DEB_CACHE=${IMAGE_DEB_CACHE:-${SIM_DEB_CACHE:-}} \
            "$here/rootfs.sh" "$packages" "$tar" "$overlay" "$configure"
    fi
    say "$tag: docker import"
    docker import --message "${repository%%/*} $kind image, inputs $hash" \
        --change "LABEL org.dgxspark-sim.kind=$kind org.dgxspark-sim.inputs=$hash" "$@" "$tar" "$tag" >/dev/null
    prune "$kind" "$hash" "$repository" "${IMAGE_STABLE_TAG:-latest}"
    say "$tag: ready in $((SECONDS - start))s"
}

# The execution environment's base (make ee-image): Debian trixie, its own .deb cache; nothing else of
# this script runs for it, and current.env (the simulated cluster's images) is left as it is.
if [[ $what == ee-base ]]; then
    ee_suite=trixie
    ee_hash=$(DIGEST_SUITE=$ee_suite digest sim/images/ee-base sim/images/rootfs.sh)
    IMAGE_REPOSITORY=dgxspark-ee/base IMAGE_SUITE=$ee_suite IMAGE_DEB_CACHE=$cache/debs-$ee_suite \
        IMAGE_STABLE_TAG=$ee_suite rootfs_image ee-base "$ee_hash" "$repo/sim/images/ee-base/packages.txt" "" \
        "$repo/sim/images/ee-base/configure.sh" \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["bash"]'
    docker tag "dgxspark-ee/base:$ee_hash" "dgxspark-ee/base:$ee_suite"
    echo "EE_BASE_IMAGE=dgxspark-ee/base:$ee_hash"
    exit 0
fi

node_hash=$(digest sim/node sim/images/rootfs.sh)
python_hash=$(digest sim/images/python sim/images/rootfs.sh)
node_image=dgxspark-sim/node:$node_hash
python_image=dgxspark-sim/python:$python_hash

if [[ $what == all || $what == node ]]; then
    rootfs_image node "$node_hash" "$repo/sim/node/packages.txt" "$repo/sim/node/rootfs" "$repo/sim/node/configure.sh" \
        --change 'ENV container=docker' --change 'CMD ["/sbin/init"]'
fi

engine_image='' engine_tar=''
if [[ $what == all || $what == python || $what == engine ]]; then
    rootfs_image python "$python_hash" "$repo/sim/images/python/packages.txt" "" "" \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]'
fi
if [[ $what == all || $what == engine ]]; then
    # SIM_ENGINE_SRC: another engine source folder (tests of this script); default sim/engine.
    engine_src=${SIM_ENGINE_SRC:-sim/engine}
    [[ -d $repo/$engine_src || -d $engine_src ]] || die "$engine_src/ is missing: the engine image packages it"
    if [[ -d $repo/$engine_src ]]; then engine_src=$repo/$engine_src; fi
    serve_args=plugins/plugin_utils/profile/vllm_serve_args.py
    [[ -f $repo/$serve_args ]] || die "$serve_args is missing: the engine image carries it"
    engine_hash=$(
        {
            echo "$python_image"
            digest sim/images/engine "$engine_src" "$serve_args"
        } | sha256sum | cut -c1-12
    )
    engine_image=dgxspark-sim/engine:$engine_hash
    engine_tar=$images/engine-$engine_hash.tar
    start=$SECONDS
    if image_exists "$engine_image"; then
        say "$engine_image: present (inputs unchanged)"
    else
        say "$engine_image: docker build FROM $python_image"
        context=$cache/build/engine-context
        rm -rf "$context"
        mkdir -p "$context/plugin_utils"
        cp -a "$repo/sim/images/engine/." "$context/"
        # the engine's own files, without bytecode caches or test leftovers
        mkdir -p "$context/engine"
        tar -C "$engine_src" --exclude=__pycache__ --exclude='*.pyc' --exclude=.pytest_cache -cf - . | tar -C "$context/engine" -xf -
        cp "$repo/$serve_args" "$context/plugin_utils/_vllm_serve_args.py"
        built=dgxspark-sim/engine-build:$engine_hash
        if ! docker build --build-arg "BASE=$python_image" -t "$built" "$context" >"$cache/build/engine-build.log" 2>&1; then
            tail -n 30 "$cache/build/engine-build.log" >&2
            die "docker build of the engine image failed (log: $cache/build/engine-build.log)"
        fi
        rm -rf "$context"
        # Flatten to one layer: the smallest tarball to `docker load` into every node (with the vfs
        # driver the nodes used at first, which copies the filesystem per layer, it halved load and disk).
        mapfile -t changes < <(docker image inspect "$built" --format '{{range .Config.Env}}ENV {{.}}
{{end}}WORKDIR {{.Config.WorkingDir}}
CMD {{json .Config.Cmd}}')
        change_args=(--change "LABEL org.dgxspark-sim.kind=engine org.dgxspark-sim.inputs=$engine_hash")
        for change in "${changes[@]}"; do
            if [[ -n $change ]]; then change_args+=(--change "$change"); fi
        done
        flat=$(docker create "$built")
        docker export "$flat" | docker import --message "dgxspark-sim engine image, inputs $engine_hash" \
            "${change_args[@]}" - "$engine_image" >/dev/null
        docker rm "$flat" >/dev/null
        docker rmi "$built" >/dev/null
        say "$engine_image: built in $((SECONDS - start))s"
    fi
    docker tag "$engine_image" dgxspark-sim/engine:latest
    if [[ ! -f $engine_tar ]]; then
        say "$engine_image: docker save -> $engine_tar"
        docker save -o "$engine_tar.tmp" "$engine_image" dgxspark-sim/engine:latest
        mv "$engine_tar.tmp" "$engine_tar"
    fi
    prune engine "$engine_hash"
fi

{
    echo "SIM_NODE_IMAGE=$node_image"
    echo "SIM_PYTHON_IMAGE=$python_image"
    echo "SIM_ENGINE_IMAGE=$engine_image"
    echo "SIM_ENGINE_TAR=$engine_tar"
} | tee "$images/current.env.tmp"
mv "$images/current.env.tmp" "$images/current.env"

#!/usr/bin/env bash
# CI on the Pythons besides the machine's 3.11 (.ci/run calls this last): Python 3.13 from Debian 13
# "trixie" and 3.14 from Debian unstable "sid", each in a minimal root made with debootstrap.
# In each: a venv with runlines (editable, as README's test command) and its [pandas], [numpy] and
# [duckdb] extras plus the test tools, the C extension built and required, and the core suite:
# tests/, where the tests of torch, Spark, transformers, Lightning, Playwright and matplotlib skip,
# saying so (they are not installed; they may publish no wheel for a new Python).
# The roots are cached in .ci/roots/ (ignored by git): a rerun on this machine reuses them, a fresh
# machine builds them (about a minute each). `rm -rf .ci/roots` builds them anew.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
roots=$repo/.ci/roots
mkdir -p "$roots"

command -v debootstrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq debootstrap; }

# The Debian mirror that this machine's apt uses (a deb line or a deb822 URIs field).
mirror=$({ grep -hE '^(deb |URIs:)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null || true; } |
    { grep -oE '(https?|file)://[^ ]+/debian/?( |$)' || true; } | head -n 1 | tr -d ' ')
mirror=${mirror:-http://deb.debian.org/debian}

mounts=()
unmount_all() {
    local i
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        umount -R "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true
    done
    mounts=()
}
trap unmount_all EXIT

# Mounts left under .ci/roots by a run that was killed: off first, or `rm -rf` of a root would
# reach the host's /dev and certificates through them.
mounted_under() { awk -v root="$1/" 'index($2, root) == 1 { print $2 }' /proc/self/mounts | sort -r; }
while read -r stale; do umount -l "$stale" || true; done < <(mounted_under "$roots")
if [[ -n $(mounted_under "$roots") ]]; then
    echo "still mounted under $roots: unmount it, then run again" >&2
    exit 1
fi
trap 'exit 130' INT TERM # through the EXIT trap: nothing stays mounted

seconds() { echo $(($(date +%s) - $1)); }

# bind SRC [read-only]: the host's SRC at the same path inside $root.
bind() {
    local src=$1 dst=$root$1
    if [[ -d $src ]]; then mkdir -p "$dst"; else mkdir -p "$(dirname "$dst")" && touch "$dst"; fi
    mount --bind "$src" "$dst"
    mounts+=("$dst")
    mount -o remount,bind,ro "$dst"
}

# What pip on this machine reads: its config files, and the local paths they and PIP_* name
# (find-links folders, file:// indexes, whose links go up from simple/, the constraints file).
pip_paths() {
    python -m pip config debug 2>/dev/null | sed -n 's/^  \(\/.*\), exists: True$/\1/p'
    { python -m pip config list 2>/dev/null || true; env | grep '^PIP_' || true; } |
        { grep -oE "(file://)?/[^' \"]+" || true; } | sed -e 's|^file://||' -e 's|/simple/\?$||'
}

build_root() { # suite python
    local suite=$1 packages="$2,$2-venv,$2-dev,gcc,libc6-dev,ca-certificates,git,jq"
    if [[ -f $root/.ci-packages && $(<"$root/.ci-packages") == "$packages" ]]; then
        echo "$suite root: cached ($root)"
        return
    fi
    local t0
    t0=$(date +%s)
    rm -rf "$root" "$root.tmp"
    if ! debootstrap --variant=minbase --include="$packages" "$suite" "$root.tmp" "$mirror" \
        >"$roots/$suite.log" 2>&1; then
        tail -n 20 "$roots/$suite.log"
        return 1
    fi
    echo "$packages" >"$root.tmp/.ci-packages"
    mv "$root.tmp" "$root"
    echo "$suite root: built from $mirror in $(seconds "$t0")s"
}

test_in_root() { # suite python
    local suite=$1 python=$2 t0 path
    root=$roots/$suite
    build_root "$suite" "$python"

    # The working tree as git sees it (no build outputs of the host's 3.11).
    rm -rf "$root/src"
    mkdir "$root/src"
    git ls-files -z --cached --others --exclude-standard |
        tar --null --ignore-failed-read -T - -c 2>/dev/null | tar -x -C "$root/src"

    cp /etc/resolv.conf "$root/etc/resolv.conf"
    mount -t proc proc "$root/proc"
    mounts+=("$root/proc")
    mount --rbind /dev "$root/dev"
    mount --make-rslave "$root/dev"
    mounts+=("$root/dev")
    bind /etc/ssl/certs
    while read -r path; do
        if [[ -e $path && $path != /etc/ssl/certs* ]]; then bind "$path"; fi
    done < <(pip_paths | sort -u)

    local -a environment=(PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8
        RUNLINES_REQUIRE_SPEEDUPS=1)
    mapfile -t -O ${#environment[@]} environment < <(env | grep -E \
        '^(PIP_[A-Z_]*|SSL_CERT_(FILE|DIR)|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|(https?|no)_proxy|(HTTPS?|NO)_PROXY)=' || true)

    t0=$(date +%s)
    chroot "$root" env -i "${environment[@]}" bash -euo pipefail -c "
        cd /src
        rm -rf /root/venv
        $python -m venv /root/venv
        /root/venv/bin/pip install -q -e '.[pandas,numpy,duckdb]' 'pytest>=8' 'freezegun>=1.4' \
            'hypothesis>=6.100' 2>&1 | { grep -v '^WARNING: Location' || true; }
        version=\$(/root/venv/bin/runlines --version)
        echo \"$python: \$version\"
        grep -q 'C fast path: on$' <<<\"\$version\"
    "
    echo "$suite ($python): venv and install in $(seconds "$t0")s"

    t0=$(date +%s)
    chroot "$root" env -i "${environment[@]}" bash -c \
        'cd /src && /root/venv/bin/python -m pytest -q -p no:cacheprovider'
    echo "$suite ($python): core suite in $(seconds "$t0")s"
    unmount_all
}

test_in_root trixie python3.13
test_in_root sid python3.14

# .ci/apt.sh — sourced by the CI scripts: installing Debian packages they need, as root
# or through sudo, with `apt-get update` run at most once.  Set ci_name first (for errors).

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "${ci_name:-ci}: need root to run: $*" >&2
        return 1
    fi
}

apt_updated=0
apt_install() {
    if [ "$apt_updated" -eq 0 ]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        apt_updated=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

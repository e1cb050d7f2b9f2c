# .ci/apt.sh — sourced by the CI scripts: installing Debian packages they need, as root
# or through sudo, with `apt-get update` run at most once per script and one
# apt-get at a time across the scripts.  Set ci_name first (for errors).

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

# The CI's stages run side by side (.ci/run): one apt-get at a time, through a lock file.
apt_get() {
    (
        if command -v flock >/dev/null 2>&1; then
            flock 9
        fi
        as_root env DEBIAN_FRONTEND=noninteractive apt-get "$@"
    ) 9>"${TMPDIR:-/tmp}/tiktoken_inc_ci_apt.lock"
}

apt_updated=0
apt_update_once() {
    if [ "$apt_updated" -eq 0 ]; then
        apt_get update -qq
        apt_updated=1
    fi
}

apt_install() {
    apt_update_once
    apt_get install -y -qq --no-install-recommends "$@"
}

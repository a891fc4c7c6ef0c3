#!/bin/sh
# The image's entrypoint (under tini): starts as root only to make the mounted workspaces
# writable, then runs the command as an unprivileged user, never as root.
#
# The user is the owner of the first folder mounted under $AGENTD_WORKSPACE_ROOT (your code,
# bind-mounted: files agentd writes stay yours on the host), else `agentd` (uid 1000). A
# mount folder Docker created itself (root-owned and empty, e.g. compose's ./workspace on a
# first `up`) is handed to that user. AGENTD_HOME, the image's own volume, follows the user.
set -eu

if [ "$(id -u)" != 0 ]; then  # `docker run --user ...`: the operator chose; nothing to fix
    exec "$@"
fi

root="${AGENTD_WORKSPACE_ROOT:-/workspaces}"
home="${AGENTD_HOME:-/var/lib/agentd}"
uid="${AGENTD_UID:-1000}"
gid="${AGENTD_GID:-1000}"
mkdir -p "$root" "$home"
for dir in "$root"/*/; do
    [ -d "$dir" ] || continue
    owner="$(stat -c %u "$dir")"
    if [ "$owner" != 0 ]; then
        uid="$owner"
        gid="$(stat -c %g "$dir")"
        break
    fi
done
for dir in "$root"/*/; do
    [ -d "$dir" ] || continue
    if [ "$(stat -c %u "$dir")" = 0 ] && [ -z "$(ls -A "$dir")" ]; then
        chown "$uid:$gid" "$dir"
    fi
done
chown "$uid:$gid" "$root"
# The image's own volume is the user's: after a first start, a new mount owner, or a file a
# root `docker exec agentd agentd token ...` left behind (only those are touched).
find "$home" \( ! -uid "$uid" -o ! -gid "$gid" \) -exec chown "$uid:$gid" {} +
export HOME="${AGENTD_USER_HOME:-/home/agentd}"
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@"

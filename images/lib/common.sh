# Shared helpers for images/build, images/test and images/vm/*. Sourced, not executed.
# Why no registry: image registries are unreachable, so every image starts from a Debian
# bookworm root made by debootstrap and turned into an image with `docker import`.
IMAGES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=$(cd "$IMAGES_DIR/.." && pwd)
CACHE_DIR=${PERIGEE_CACHE_DIR:-/var/cache/perigee}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
BASE_IMAGE=perigee/debian-base:bookworm
# The Debian client speaks the daemon's API version and has BuildKit built in.
DOCKER=${DOCKER:-$(command -v /usr/bin/docker || command -v docker)}
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/perigee/dockerd.log}

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { printf '[%s] FAIL: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# Starts Debian's dockerd when no daemon answers. No bridge and no iptables: every container
# and build here uses host networking, so dockerd never touches the host's firewall.
ensure_dockerd() {
  "$DOCKER" info >/dev/null 2>&1 && return 0
  command -v dockerd >/dev/null || die "dockerd missing: apt-get install docker.io (scripts/apt/images.txt)"
  mkdir -p "$(dirname "$DOCKERD_LOG")"
  log "starting dockerd (log: $DOCKERD_LOG)"
  setsid dockerd --iptables=false --ip6tables=false --bridge=none >"$DOCKERD_LOG" 2>&1 < /dev/null &
  for _ in $(seq 60); do "$DOCKER" info >/dev/null 2>&1 && return 0; sleep 1; done
  die "dockerd did not answer within 60 s; see $DOCKERD_LOG"
}

# debootstrap --variant=minbase bookworm → tarball in the cache (built once, reused).
base_tarball() {
  local tar="$CACHE_DIR/debian-$SUITE-minbase.tar"
  if [ ! -s "$tar" ]; then
    command -v debootstrap >/dev/null || die "debootstrap missing: apt-get install debootstrap"
    local dir; dir=$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")
    log "debootstrap --variant=minbase $SUITE (once; cached as $tar)"
    debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$dir" "$DEBIAN_MIRROR" >"$CACHE_DIR/debootstrap.log" 2>&1 \
      || { rm -rf "$dir"; die "debootstrap failed; see $CACHE_DIR/debootstrap.log"; }
    cat >"$dir/etc/apt/sources.list" <<SRC
deb $DEBIAN_MIRROR $SUITE main
deb $DEBIAN_MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
SRC
    # Container-friendly apt: no docs/man pages, no recommends, no cached .debs.
    cat >"$dir/etc/dpkg/dpkg.cfg.d/01-perigee-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
SLIM
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$dir/etc/apt/apt.conf.d/01-perigee-norecommends"
    rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/usr/share/doc/*/[!c]* "$dir"/usr/share/man/*
    tar -C "$dir" --numeric-owner -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$dir"
  fi
  echo "$tar"
}

# The base image: imported from the cached tarball unless an image with the same tarball digest exists.
ensure_base_image() {
  mkdir -p "$CACHE_DIR"
  local tar digest have
  tar=$(base_tarball)
  digest=$(sha256sum "$tar" | cut -c1-16)
  have=$("$DOCKER" image inspect -f '{{index .Config.Labels "org.perigee.rootfs"}}' "$BASE_IMAGE" 2>/dev/null || true)
  if [ "$have" != "$digest" ]; then
    log "docker import $tar → $BASE_IMAGE"
    "$DOCKER" import -c "LABEL org.perigee.rootfs=$digest" -c 'ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8' \
      -c 'CMD ["/bin/bash"]' "$tar" "$BASE_IMAGE" >/dev/null
  fi
}

# Shared helpers for images/build, images/test and images/vm/*. Sourced, not executed.
# The base image: `docker pull debian:bookworm-slim` when a registry answers; when it can't be pulled
# (no registry reachable, as on the project's machines) a Debian bookworm root made by debootstrap and
# turned into an image with `docker import`. Either way the Dockerfiles build FROM $BASE_IMAGE.
IMAGES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=$(cd "$IMAGES_DIR/.." && pwd)
CACHE_DIR=${PERIGEE_CACHE_DIR:-/var/cache/perigee}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
BASE_IMAGE=perigee/debian-base:bookworm
PULL_IMAGE=${PERIGEE_BASE_PULL:-debian:$SUITE-slim}
# An unreachable registry must cost seconds, not the daemon's minutes of retries.
PULL_TIMEOUT_S=${PERIGEE_BASE_PULL_TIMEOUT:-30}
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

# For tests that need Docker (`make test`): when no daemon can be started here, the one convention for a test
# that cannot run (DEVELOPERS.md, "Tests"): exits 0 printing why it skips, or fails when PERIGEE_REQUIRE_ROOT_TESTS
# is set (.ci/run sets it); else returns with one running. $1 names the test in the message.
docker_or_skip() {
  local what=$1 why
  skip_with() {
    if [ -n "${PERIGEE_REQUIRE_ROOT_TESTS:-}" ]; then
      printf '[%s] FAILED: cannot run: %s (PERIGEE_REQUIRE_ROOT_TESTS is set: a test that cannot run fails)\n' "$what" "$*"
      exit 1
    fi
    printf '[%s] SKIPPED: %s\n' "$what" "$*"; exit 0
  }
  [ "$(id -u)" = 0 ] || skip_with "not root: starting a Docker daemon and its containers needs root"
  { [ -n "$DOCKER" ] && command -v dockerd >/dev/null; } || skip_with "no docker client or dockerd (scripts/apt/images.txt installs docker.io)"
  why=$( (ensure_dockerd) 2>&1 ) || skip_with "no Docker daemon could be started: $(printf '%s' "$why" | tail -n 1)"
}

# debootstrap --variant=minbase bookworm → tarball in the cache (built once, reused).
base_tarball() {
  local tar="$CACHE_DIR/debian-$SUITE-minbase.tar"
  if [ ! -s "$tar" ]; then
    command -v debootstrap >/dev/null || die "debootstrap missing: apt-get install debootstrap"
    local dir; dir=$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX") && chmod 0755 "$dir"   # the image's /
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

# Which path made $BASE_IMAGE ('' when there is none). A base imported before the label existed carries
# only org.perigee.rootfs: it is still the debootstrap one (re-making it would void every build cache).
base_made_by() {
  "$DOCKER" image inspect -f '{{with .Config.Labels}}{{with index . "org.perigee.base"}}{{.}}{{else}}{{with index . "org.perigee.rootfs"}}debootstrap, rootfs {{.}}{{end}}{{end}}{{end}}' \
    "$BASE_IMAGE" 2>/dev/null || true
}

# $BASE_IMAGE, made once and reused (PERIGEE_BASE_REFRESH=1 makes it again): the pulled image when the
# pull succeeds, else debootstrap + docker import. The label org.perigee.base says which path made it.
ensure_base_image() {
  mkdir -p "$CACHE_DIR"
  local made_by
  made_by=$(base_made_by)
  if [ -n "$made_by" ] && [ -z "${PERIGEE_BASE_REFRESH:-}" ]; then
    log "base image: reusing $BASE_IMAGE (made by: $made_by)"
    return 0
  fi
  pull_base_image || import_base_image
  log "base image: $BASE_IMAGE made by: $(base_made_by)"
}

# docker pull $PULL_IMAGE, then what the debootstrap root has and slim lacks: ca-certificates (the
# Dockerfiles run update-ca-certificates) and apt without recommends. Fails (1) with the reason logged.
pull_base_image() {
  local out rc=0 reason digest
  log "base image: trying docker pull $PULL_IMAGE (timeout ${PULL_TIMEOUT_S} s)"
  out=$(timeout "$PULL_TIMEOUT_S" "$DOCKER" pull -q "$PULL_IMAGE" 2>&1 </dev/null) || rc=$?
  if [ "$rc" -ne 0 ]; then
    if [ "$rc" -eq 124 ]; then reason="no answer within ${PULL_TIMEOUT_S} s"
    else reason="exit $rc: $(printf '%s' "$out" | tail -n 1 | cut -c1-240)"; fi
    log "base image: pull of $PULL_IMAGE failed ($reason); falling back to debootstrap + docker import"
    return 1
  fi
  digest=$("$DOCKER" image inspect -f '{{index .RepoDigests 0}}' "$PULL_IMAGE" 2>/dev/null || true)
  log "base image: pulled ${digest:-$PULL_IMAGE}; adding ca-certificates → $BASE_IMAGE"
  DOCKER_BUILDKIT=1 "$DOCKER" build --network host --progress plain --build-arg "FROM_IMAGE=$PULL_IMAGE" \
    --label "org.perigee.base=docker pull ${digest:-$PULL_IMAGE}" -t "$BASE_IMAGE" - \
    >"$CACHE_DIR/base-from-pull.log" 2>&1 <<'DOCKERFILE' || {
ARG FROM_IMAGE
FROM ${FROM_IMAGE}
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates >/dev/null \
 && printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >/etc/apt/apt.conf.d/01-perigee-norecommends \
 && rm -rf /var/lib/apt/lists/*
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
CMD ["/bin/bash"]
DOCKERFILE
    log "base image: finishing the pulled $PULL_IMAGE failed (log: $CACHE_DIR/base-from-pull.log); falling back to debootstrap + docker import"
    return 1
  }
}

# debootstrap root (cached tarball) → docker import.
import_base_image() {
  local tar digest
  tar=$(base_tarball)
  digest=$(sha256sum "$tar" | cut -c1-16)
  log "base image: docker import $tar → $BASE_IMAGE"
  "$DOCKER" import -c "LABEL org.perigee.base=\"debootstrap $SUITE minbase, rootfs $digest\" org.perigee.rootfs=$digest" \
    -c 'ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' "$tar" "$BASE_IMAGE" >/dev/null
}

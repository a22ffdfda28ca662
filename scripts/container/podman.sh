#!/usr/bin/env bash
# podman with the settings these hosts need (see containers.conf next to this
# file): runc instead of crun, cgroupfs instead of systemd, no default
# ulimits. Every image/container command of the Makefile goes through here.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
exec podman --runtime runc --cgroup-manager=cgroupfs "$@"

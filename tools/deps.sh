#!/bin/sh
# deps.sh - installs what spmdc needs to build and test, if it is missing.
# Debian/Ubuntu packages: cmake, a C compiler, flex, bison, cmocka, uthash, jansson.
set -eu
need=""
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v make >/dev/null 2>&1 || need="$need make"
command -v flex >/dev/null 2>&1 || need="$need flex"
command -v bison >/dev/null 2>&1 || need="$need bison"
[ -f /usr/include/cmocka.h ] || need="$need libcmocka-dev"
[ -f /usr/include/uthash.h ] || need="$need uthash-dev"
[ -f /usr/include/jansson.h ] || need="$need libjansson-dev"
[ -n "$need" ] || exit 0
echo "deps.sh: installing:$need"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq $need >/dev/null

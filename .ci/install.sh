#!/usr/bin/env bash
# Installs what lockmeter needs to build and test, on a fresh Debian machine with rustup.
# Idempotent: skips what is already there. `install.sh build`: only what building needs (the
# README's first command); no argument: also what the tests use (chromium, perf).
set -euo pipefail
only_build=false
[ "${1:-}" = build ] && only_build=true

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
# g++ compiles the C++ ground-truth program (std::mutex, std::shared_mutex) of the tests.
$only_build || command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
# binutils: objcopy and strip for the separate-debug-file tests.
command -v objcopy >/dev/null 2>&1 || need_apt+=(binutils)
# A font for `lockmeter plot --out F.png` (SVG needs none).
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_apt+=(fonts-dejavu-core)
# Headless Chromium renders the HTML report in its end-to-end test.
$only_build || command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# tmux runs `lockmeter top` in an 80x24 pane in its end-to-end test (live/top.rs).
$only_build || command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
# The eBPF collector (`lockmeter record`): clang compiles the BPF programs, bpftool dumps the
# kernel's BTF into vmlinux.h, libbpf-sys builds libbpf against libelf and zlib.
command -v clang >/dev/null 2>&1 || need_apt+=(clang)
command -v bpftool >/dev/null 2>&1 || need_apt+=(bpftool)
[ -e /usr/include/libelf.h ] || need_apt+=(libelf-dev)
[ -e /usr/include/zlib.h ] || need_apt+=(zlib1g-dev)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# Independent counts of the same tracepoints for the eBPF tests, and `perf lock` for the benchmark.
$only_build || command -v perf >/dev/null 2>&1 || need_apt+=(linux-perf)
# Real programs for lock swapping (`cli/tests/swap.rs`) and the README's `compare` table.
$only_build || command -v memcached >/dev/null 2>&1 || need_apt+=(memcached)
$only_build || command -v memcaslap >/dev/null 2>&1 || need_apt+=(libmemcached-tools)
# sysbench mutex: a many-mutex workload in the limits tests (skipped without it) and `overhead`.
$only_build || command -v sysbench >/dev/null 2>&1 || need_apt+=(sysbench)
# strace -f runs a metered program, and is metered itself, in processes/strace.rs.
$only_build || command -v strace >/dev/null 2>&1 || need_apt+=(strace)
# mutrace (a column of `overhead` where installed) is not packaged for Debian 12: not installed
# here; `overhead` says "not run: not installed".
if [ ${#need_apt[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1; then
        echo "install: apt-get install ${need_apt[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
    else
        echo "install: please install ${need_apt[*]} (a C compiler for the end-to-end tests, a font for PNG plots, chromium for the HTML report test, tmux for the top test, clang/bpftool/libelf/zlib for eBPF)" >&2
        exit 1
    fi
fi

# The workspace's rust-version (Cargo.toml): the hooks use core::hint::cold_path (Rust 1.95).
need_rust=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$(dirname "$0")/../Cargo.toml")
have_rust=$(rustc --version 2>/dev/null | awk '{print $2}')
if [ -n "$need_rust" ] && [ "$(printf '%s\n%s\n' "$need_rust" "${have_rust:-0}" | sort -V | head -1)" != "$need_rust" ]; then
    echo "install: Rust ${have_rust:-(none)} is older than the $need_rust lockmeter needs: updating stable"
    command -v rustup >/dev/null 2>&1 && rustup update stable \
        || { echo "install: cannot update Rust: install $need_rust or later (rustup update stable)" >&2; exit 1; }
fi

if command -v rustup >/dev/null 2>&1; then
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
    done
    # The aarch64 standard library, for CI's compile check of the collector on aarch64 (there is
    # no aarch64 machine to run it on here); CI says so when it cannot be had.
    rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu \
        || rustup target add aarch64-unknown-linux-gnu \
        || echo "install: could not add the aarch64 target; CI's aarch64 check will say it skipped"
fi

# The eBPF collector reads tracepoints through tracefs; `record` mounts it too, but the tests'
# independent counts (perf) need it first.
if [ "$(id -u)" = 0 ] && [ -d /sys/kernel/tracing ] && [ ! -e /sys/kernel/tracing/events ]; then
    mount -t tracefs nodev /sys/kernel/tracing || echo "install: could not mount tracefs; eBPF tests will say why they skip"
fi

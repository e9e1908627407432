#!/usr/bin/env bash
# Builds a Debian package of topo-run with the install layout under /usr
# (scripts/install.sh --prefix /usr), its dependencies found by dpkg-shlibdeps from the
# binaries' own needs (Open MPI, PMIx, hwloc, libc) and its metadata from Cargo.toml.
#
#   bash scripts/package-deb.sh [--no-build] [-o DIR]
#
# Writes DIR/topo-run_VERSION_ARCH.deb (default DIR: target/debian) and prints its path.
# The module file goes to /usr/share/modulefiles/topo-run/VERSION (Tcl; Debian's Lmod
# and Environment Modules both read it after `module use /usr/share/modulefiles`).
# Install with `apt-get install ./target/debian/topo-run_*.deb` (or dpkg -i), remove with
# `apt-get remove topo-run`.
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/debian
build=()
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) build=(--no-build); shift ;;
        -o) out="${2:?-o needs a directory}"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "package-deb.sh: error: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
for tool in dpkg-deb dpkg-shlibdeps fakeroot; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "package-deb.sh: error: $tool not found; apt-get install dpkg-dev fakeroot" >&2
        exit 1
    fi
done

field() { sed -n "s/^$1 = \"\(.*\)\"/\1/p" Cargo.toml | head -1; }
version="$(field version)"
license="$(field license)"
arch="$(dpkg --print-architecture)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
stage="$work/debian/topo-run"
bash scripts/install.sh --prefix /usr --destdir "$stage" "${build[@]}" >/dev/null
# dpkg owns the files: the script's manifest (for --uninstall) does not belong in it.
rm -f "$stage/usr/share/topo-run/install-manifest"

# Dependencies: what the ELF files need, as dpkg-shlibdeps maps them to packages.
printf 'Source: topo-run\n\nPackage: topo-run\nArchitecture: any\n' >"$work/debian/control"
elves=()
while IFS= read -r f; do
    if [ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ]; then elves+=("$f"); fi
done < <(find "$stage" -type f)
# Debian packages ship without debug information (it would triple the size).
strip --strip-debug "${elves[@]}"
depends="$(cd "$work" && dpkg-shlibdeps -O "${elves[@]/#$work\//}" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')"
if [ -z "$depends" ]; then
    echo "package-deb.sh: error: dpkg-shlibdeps found no dependencies" >&2
    exit 1
fi

size_kib="$(du -sk "$stage" | cut -f1)"
mkdir -p "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<EOF
Package: topo-run
Version: $version
Architecture: $arch
Maintainer: topo-run developers <topo-run@example.invalid>
Installed-Size: $size_kib
Depends: $depends, openmpi-bin
Recommends: slurm-client, hwloc
Suggests: lmod | environment-modules
Section: net
Priority: optional
Homepage: https://example.invalid/topo-run
Description: topology-aware MPI collectives on Slurm clusters
 topo-run makes the Bcast, Reduce, Allreduce and Barrier of MPI programs follow the
 machine's hierarchy (cache, NUMA node, socket, node, leaf switch, spine): change
 "mpirun ./app" to "srun --mpi=pmix topo-run -- ./app". Unmodified Open MPI programs
 get the collectives through a preloaded PMPI library.
 .
 License: $license.
EOF
mkdir -p "$out"
deb="$out/topo-run_${version}_${arch}.deb"
fakeroot dpkg-deb --build --root-owner-group "$stage" "$deb" >/dev/null
echo "$deb"

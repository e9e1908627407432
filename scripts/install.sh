#!/usr/bin/env bash
# Installs topo-run for everyone: the launcher, the PMPI library, the tuner, the
# simulator, the example programs, man pages, shell completions, docs, example maps and job scripts, and module
# files (Tcl for Environment Modules and Lmod, Lua for Lmod) for the prefix.
#
#   bash scripts/install.sh [--prefix DIR] [--modulefiles DIR] [--destdir DIR] [--no-build]
#   bash scripts/install.sh --prefix DIR --uninstall
#
#   --prefix DIR        where to install (default /usr/local)
#   --modulefiles DIR   where the Tcl module file goes (default PREFIX/share/modulefiles),
#                       for example a site's module tree such as /opt/modulefiles; both
#                       Environment Modules and Lmod read it. The Lua one for Lmod goes
#                       to PREFIX/share/lmod
#   --destdir DIR       stage the tree under DIR (packagers): files go to DIR/PREFIX but
#                       refer to PREFIX
#   --no-build          install what target/release already holds (built with
#                       cargo build --release --locked -p topo-run -p topo-tune -p topo-simulate
#                       -p topo-examples -p topo-preload)
#   --with-mpich        also build (MPICC=mpicc.mpich, into target/mpich) and install the
#                       PMPI library for MPICH-ABI programs, lib/topo-run/mpich/, which
#                       `topo-run` then preloads into them (docs/mpi-support.md)
#   --uninstall         remove exactly what the install wrote (its manifest,
#                       PREFIX/share/topo-run/install-manifest), and the folders it made
#                       that are empty then
#
# The installed tree needs nothing from the build tree. Layout (docs/install.md):
#   bin/topo-run                               the launcher
#   lib/topo-run/libtopo_preload.so            the PMPI library (found from bin/ by itself)
#   lib/topo-run/mpich/libtopo_preload.so      the same for MPICH-ABI programs (--with-mpich)
#   libexec/topo-run/topo-run-tune             started by `topo-run tune`
#   libexec/topo-run/topo-run-simulate         started by `topo-run simulate`
#   libexec/topo-run/examples/                 coll-check, coll-bench, coll-cases, wave2d
#   share/man/man1/topo-run*.1, man7/topo-run.7
#   share/bash-completion/completions/topo-run, share/zsh/site-functions/_topo-run,
#   share/fish/vendor_completions.d/topo-run.fish
#   share/doc/topo-run/                        README.md and docs/
#   share/topo-run/examples/                   job files, network maps, rules, job scripts,
#                                              C, Fortran and Python programs
#   share/modulefiles/topo-run/VERSION (Tcl), share/lmod/topo-run/VERSION.lua (Lua)
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr/local
modulefiles=
destdir=
build=1
uninstall=0
mpich=0
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        --prefix=*) prefix="${1#*=}"; shift ;;
        --modulefiles) modulefiles="${2:?--modulefiles needs a directory}"; shift 2 ;;
        --modulefiles=*) modulefiles="${1#*=}"; shift ;;
        --destdir) destdir="${2:?--destdir needs a directory}"; shift 2 ;;
        --destdir=*) destdir="${1#*=}"; shift ;;
        --no-build) build=0; shift ;;
        --with-mpich) mpich=1; shift ;;
        --uninstall) uninstall=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: error: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$prefix" in
    /*) ;;
    *) echo "install.sh: error: --prefix must be an absolute path, not $prefix" >&2; exit 2 ;;
esac
prefix="${prefix%/}"
[ -n "$prefix" ] || prefix=/
modulefiles="${modulefiles:-$prefix/share/modulefiles}"
manifest_rel="share/topo-run/install-manifest"
manifest="$destdir$prefix/$manifest_rel"

if [ "$uninstall" = 1 ]; then
    if [ ! -f "$manifest" ]; then
        echo "install.sh: error: no manifest at $manifest: nothing installed by this script there" >&2
        exit 1
    fi
    mapfile -t entries <"$manifest"
    removed=0
    # Files first (the manifest among them), then the folders the install made, deepest
    # first, if they are empty.
    for entry in "${entries[@]}"; do
        [ "${entry%% *}" = file ] || continue
        rm -f -- "$destdir${entry#file }" && removed=$((removed + 1))
    done
    for entry in "${entries[@]}"; do
        [ "${entry%% *}" = dir ] && echo "${entry#dir }"
    done | sort -r | while IFS= read -r d; do
        rmdir -- "$destdir$d" 2>/dev/null || true
    done
    echo "install.sh: removed $removed files installed under $prefix"
    exit 0
fi

version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
if [ "$build" = 1 ]; then
    cargo build --release --locked -p topo-run -p topo-tune -p topo-simulate -p topo-examples -p topo-preload
fi
rel=target/release
for f in topo-run topo-run-tune topo-run-simulate libtopo_preload.so coll-check coll-bench coll-cases wave2d; do
    if [ ! -f "$rel/$f" ]; then
        echo "install.sh: error: $rel/$f is missing; build first, or leave out --no-build" >&2
        exit 1
    fi
done

if [ -n "$destdir" ]; then
    mkdir -p -- "$destdir"
fi
staged_files=()
made_dirs=()
# mkdir -p that remembers which folders did not exist yet.
make_dir() {
    local d="$1" missing=()
    while [ "$d" != / ] && [ ! -d "$destdir$d" ]; do
        missing=("$d" "${missing[@]}")
        d="$(dirname "$d")"
    done
    for d in "${missing[@]}"; do
        mkdir -- "$destdir$d"
        made_dirs+=("$d")
    done
}
# put MODE SOURCE DEST: install one file at PREFIX-relative DEST (absolute path).
put() {
    make_dir "$(dirname "$3")"
    install -m "$1" -- "$2" "$destdir$3"
    staged_files+=("$3")
}
# write MODE DEST: install stdin as DEST (never at the end of a pipeline: see below).
write() {
    local tmp
    tmp="$(mktemp)"
    cat >"$tmp"
    put "$1" "$tmp" "$2"
    rm -f -- "$tmp"
}

put 755 "$rel/topo-run" "$prefix/bin/topo-run"
put 644 "$rel/libtopo_preload.so" "$prefix/lib/topo-run/libtopo_preload.so"
if [ "$mpich" = 1 ]; then
    if [ "$build" = 1 ]; then
        MPICC=mpicc.mpich CARGO_TARGET_DIR=target/mpich cargo build --release --locked -p topo-preload
    fi
    if [ ! -f target/mpich/release/libtopo_preload.so ]; then
        echo "install.sh: error: target/mpich/release/libtopo_preload.so is missing; leave out --no-build" >&2
        exit 1
    fi
    put 644 target/mpich/release/libtopo_preload.so "$prefix/lib/topo-run/mpich/libtopo_preload.so"
fi
put 755 "$rel/topo-run-tune" "$prefix/libexec/topo-run/topo-run-tune"
put 755 "$rel/topo-run-simulate" "$prefix/libexec/topo-run/topo-run-simulate"
for f in coll-check coll-bench coll-cases wave2d; do
    put 755 "$rel/$f" "$prefix/libexec/topo-run/examples/$f"
done

# Man pages and completions, from the binary's own option definitions.
gen="$(mktemp -d)"
trap 'rm -rf "$gen"' EXIT
"$rel/topo-run" generate man "$gen/man" >/dev/null
for page in "$gen"/man/*.1; do
    put 644 "$page" "$prefix/share/man/man1/$(basename "$page")"
done
put 644 "$gen/man/topo-run.7" "$prefix/share/man/man7/topo-run.7"
# (Through files: `put` must not run in a pipeline's subshell, which would lose the record.)
for shell in bash zsh fish; do
    "$rel/topo-run" generate completion "$shell" >"$gen/$shell"
done
put 644 "$gen/bash" "$prefix/share/bash-completion/completions/topo-run"
put 644 "$gen/zsh" "$prefix/share/zsh/site-functions/_topo-run"
put 644 "$gen/fish" "$prefix/share/fish/vendor_completions.d/topo-run.fish"

# Docs, example maps, job files and job scripts, programs' sources.
put 644 README.md "$prefix/share/doc/topo-run/README.md"
for f in docs/*; do
    put 644 "$f" "$prefix/share/doc/topo-run/$f"
done
ex="$prefix/share/topo-run/examples"
for f in examples/jobs/* examples/maps/* examples/rules/* examples/c/* examples/fortran/* examples/python/*; do
    put 644 "$f" "$ex/${f#examples/}"
done
for f in slurm/jobs/* slurm/maps/*; do
    put 644 "$f" "$ex/slurm-${f#slurm/}"
done

# Module files: Tcl (Environment Modules, and Lmod) and Lua (Lmod).
write 644 "$modulefiles/topo-run/$version" <<EOF
#%Module1.0
## topo-run $version, installed in $prefix (written by scripts/install.sh)
proc ModulesHelp { } {
    puts stderr "topo-run $version: topology-aware MPI collectives on Slurm."
    puts stderr "In a job script: srun --mpi=pmix --cpu-bind=cores topo-run -- ./app"
    puts stderr "See man topo-run, man topo-run.7 and $prefix/share/doc/topo-run."
}
module-whatis "topo-run $version: topology-aware MPI collectives on Slurm"
conflict topo-run
setenv TOPO_RUN_HOME $prefix
prepend-path PATH $prefix/bin
prepend-path MANPATH $prefix/share/man
# An empty element keeps man's default search path when MANPATH was unset.
append-path MANPATH {}
prepend-path XDG_DATA_DIRS $prefix/share
prepend-path FPATH $prefix/share/zsh/site-functions
EOF
# Lmod reads the Tcl file too; the Lua one stays in the prefix for sites that want it.
lua_dir="$prefix/share/lmod"
write 644 "$lua_dir/topo-run/$version.lua" <<EOF
-- topo-run $version, installed in $prefix (written by scripts/install.sh)
help([[
topo-run $version: topology-aware MPI collectives on Slurm.
In a job script: srun --mpi=pmix --cpu-bind=cores topo-run -- ./app
See man topo-run, man topo-run.7 and $prefix/share/doc/topo-run.
]])
whatis("Name: topo-run")
whatis("Version: $version")
whatis("Description: topology-aware MPI collectives on Slurm")
family("topo-run")
setenv("TOPO_RUN_HOME", "$prefix")
prepend_path("PATH", "$prefix/bin")
prepend_path("MANPATH", "$prefix/share/man")
-- An empty element keeps man's default search path when MANPATH was unset.
append_path("MANPATH", "")
prepend_path("XDG_DATA_DIRS", "$prefix/share")
prepend_path("FPATH", "$prefix/share/zsh/site-functions")
EOF

# The manifest lists every file and every folder the install made.
make_dir "$(dirname "$prefix/$manifest_rel")"
{
    for f in "${staged_files[@]}"; do echo "file $f"; done
    echo "file $prefix/$manifest_rel"
    for d in "${made_dirs[@]}"; do echo "dir $d"; done
} >"$manifest"
echo "install.sh: installed topo-run $version into $destdir$prefix (${#staged_files[@]} files)"
echo "install.sh: module files: $modulefiles/topo-run/$version (Tcl), $lua_dir/topo-run/$version.lua (Lua)"
echo "install.sh: use them with: module use $modulefiles && module load topo-run"

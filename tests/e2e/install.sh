#!/usr/bin/env bash
# End-to-end tests of the site installation: scripts/install.sh into a prefix, the
# installed tree used with the build tree moved away (an MPI program through the PMPI
# library, coll-check and `topo-run tune` on the dev cluster, man pages, completions),
# the module files under Lmod and Environment Modules, --uninstall, and the Debian
# package installed with dpkg, run, and removed. Runs as root. Every srun runs under
# `timeout`.
#
#   tests/e2e/install.sh       (after cargo build --release -p topo-run -p topo-tune -p topo-simulate
#                               -p topo-examples -p topo-preload)
#
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/topo-run-e2e-install.XXXXXX")"
T=120
# shellcheck source=tests/e2e/lib.sh
source "$ROOT/tests/e2e/lib.sh"

REL="$ROOT/target/release"
HIDDEN="$ROOT/target/release.moved-away-by-install-test"
restore_build() { if [[ -d $HIDDEN ]]; then mv "$HIDDEN" "$REL"; fi; }
DEB_INSTALLED=0
cleanup() {
  restore_build
  stop_cluster
  if (( DEB_INSTALLED )); then dpkg -r topo-run >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

PREFIX="$WORK/opt/topo-run"
if bash "$ROOT/scripts/install.sh" --prefix "$PREFIX" --no-build >"$WORK/install.log" 2>&1; then
  ok "install.sh --prefix $PREFIX: $(tail -3 "$WORK/install.log" | head -1)"
else
  give_up "install.sh --prefix" "$(tail -5 "$WORK/install.log")"
fi

missing=()
for f in bin/topo-run lib/topo-run/libtopo_preload.so libexec/topo-run/topo-run-tune \
  libexec/topo-run/topo-run-simulate \
  libexec/topo-run/examples/coll-check libexec/topo-run/examples/coll-bench \
  libexec/topo-run/examples/wave2d share/man/man1/topo-run.1 share/man/man1/topo-run-plan.1 \
  share/man/man1/topo-run-tune.1 share/man/man1/topo-run-doctor.1 share/man/man7/topo-run.7 \
  share/bash-completion/completions/topo-run share/zsh/site-functions/_topo-run \
  share/fish/vendor_completions.d/topo-run.fish share/doc/topo-run/README.md \
  share/doc/topo-run/docs/install.md share/topo-run/examples/slurm-maps/dev-cluster.yaml \
  share/topo-run/examples/slurm-jobs/hello.sbatch share/topo-run/examples/c/mpi-hello.c \
  share/modulefiles/topo-run/0.1.0 share/lmod/topo-run/0.1.0.lua share/topo-run/install-manifest; do
  [[ -f $PREFIX/$f ]] || missing+=("$f")
done
if (( ${#missing[@]} == 0 )); then ok "the layout: every expected file is there"
else bad "the layout" "missing: ${missing[*]}"; fi

# No installed ELF file looks into the build tree for its libraries.
leaks=$(find "$PREFIX" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF && readelf -d "$1" 2>/dev/null | grep -E "R(UN)?PATH" | grep -F "$2" && echo "$1"' _ {} "$ROOT" \; )
if [[ -z $leaks ]]; then ok "no RPATH or RUNPATH into the build tree"
else bad "RPATH into the build tree" "$leaks"; fi

# The Open MPI program that the installed tree will run, from the installed sources.
HELLO="$WORK/mpi-hello"
if ! mpicc -O2 -o "$HELLO" "$PREFIX/share/topo-run/examples/c/mpi-hello.c" 2>"$WORK/cc.log"; then
  give_up "mpicc share/topo-run/examples/c/mpi-hello.c" "$(head -3 "$WORK/cc.log")"
fi

echo "== the installed tree, with the build tree moved away"
mv "$REL" "$HIDDEN" || give_up "moving $REL away"
IPATH="$PREFIX/bin:/usr/local/bin:/usr/bin:/bin"
EX="$PREFIX/share/topo-run/examples"
cd "$WORK" || give_up "cd $WORK"

if PATH=$IPATH topo-run plan --job "$EX/jobs/paper.yaml" --network-map "$EX/maps/paper.yaml" --rank 0 \
  >"$WORK/out" 2>"$WORK/err" && grep -q "switch1" "$WORK/out"; then
  ok "installed topo-run plan on the installed example job and map"
else
  bad "installed topo-run plan" "$(head -3 "$WORK/err")"
fi

start_cluster 2
# An unmodified MPI program: the installed launcher finds the installed PMPI library
# (lib/topo-run/, no TOPO_RUN_PRELOAD_LIB) and its collectives take topo-run's path.
run "$WORK/out" "$WORK/err" env -u TOPO_RUN_PRELOAD_LIB PATH="$IPATH" TOPO_RUN_STATS=1 \
  srun -N2 -n4 --exclusive --cpu-bind=cores topo-run --show \
  --network-map "$EX/slurm-maps/dev-cluster.yaml" -- "$HELLO"
if [[ $RC -eq 0 ]] && (( $(grep -c '^OK rank' "$WORK/out") == 4 )) \
  && grep -Eq "topo-run: stats: rank 0.*MPI_Allreduce: [1-9][0-9]* topo-run" "$WORK/err"; then
  ok "installed: srun -N2 -n4 topo-run -- mpi-hello (preloaded from lib/topo-run, Allreduce on topo-run's path)"
else
  bad "installed: srun topo-run -- mpi-hello" "exit $RC" "$(head -4 "$WORK/out")" "$(grep -v '^rank' "$WORK/err" | head -4)"
fi

# Four ranks on these two cores: no spinning (--spin 0, and Open MPI yields), as every
# such job here; spinning ranks that outnumber the cores can take minutes.
run "$WORK/out" "$WORK/err" env PATH="$IPATH" OMPI_MCA_mpi_yield_when_idle=1 srun -N2 -n4 \
  --exclusive --cpu-bind=cores \
  topo-run --spin 0 -- "$PREFIX/libexec/topo-run/examples/coll-check" --require-topo --quick
last=$(tail -1 "$WORK/out")
if [[ $RC -eq 0 && $last =~ ^[0-9]+\ passed,\ 0\ failed$ ]]; then
  ok "installed: coll-check on 2 nodes x 2: $last"
else
  bad "installed: coll-check" "exit $RC, last line: $last" "$(head -4 "$WORK/err")"
fi

# topo-run tune finds its tuner in libexec/topo-run/; on 2 nodes x 2 (two levels) it also
# measures the pipeline chunk, and the file it writes loads.
run "$WORK/out" "$WORK/err" env PATH="$IPATH" OMPI_MCA_mpi_yield_when_idle=1 srun -N2 -n4 \
  --exclusive --cpu-bind=cores topo-run tune --spin 0 --budget 20 --ops bcast --min 16K --max 64K \
  -o "$WORK/site.rules"
if [[ $RC -eq 0 ]] && grep -q '^topo-run-rules 1' "$WORK/site.rules" 2>/dev/null \
  && grep -Eq 'chunk bcast 64K: 16K [0-9.]+, 64K [0-9.]+, .* -> ' "$WORK/err" \
  && env PATH="$IPATH" topo-run plan --job "$PREFIX/share/topo-run/examples/jobs/paper.yaml" \
       --rules "$WORK/site.rules" --format env --rank 0 | grep -q '^TOPO_RUN_PLAN=.*settings=.*fragment'; then
  ok "installed: topo-run tune on 2 nodes x 2 (libexec/topo-run/topo-run-tune) measured the chunk, wrote a rules file that loads"
else
  bad "installed: topo-run tune" "exit $RC" "$(tail -4 "$WORK/err")"
fi
# topo-run simulate finds its simulator in libexec/topo-run/ (offline: no srun).
run "$WORK/out" "$WORK/err" env PATH="$IPATH" topo-run simulate \
  --job "$PREFIX/share/topo-run/examples/jobs/paper.yaml" --ops barrier
if [[ $RC -eq 0 ]] && grep -q '^barrier .* dissemination' "$WORK/out"; then
  ok "installed: topo-run simulate (libexec/topo-run/topo-run-simulate) predicted a barrier"
else
  bad "installed: topo-run simulate" "exit $RC" "$(tail -4 "$WORK/err")"
fi
# doctor from the installed tree finds the installed PMPI library.
run "$WORK/out" "$WORK/err" env -u TOPO_RUN_PRELOAD_LIB PATH="$IPATH" topo-run doctor
if [[ $RC -eq 0 ]] && grep -Eq "^OK +pmpi library +$PREFIX/bin/../lib/topo-run/libtopo_preload.so serves Open MPI" "$WORK/out"; then
  ok "installed: topo-run doctor finds lib/topo-run/libtopo_preload.so"
else
  bad "installed: topo-run doctor" "exit $RC" "$(grep -E '^(WARN|FAIL)' "$WORK/out" | head -4)"
fi
stop_cluster

# module load / unload: PATH, MANPATH (man's own pages still found), TOPO_RUN_HOME.
MODULE_CHECK='
  module load topo-run || exit 1
  [ "$(command -v topo-run)" = "$PREFIX/bin/topo-run" ] || { echo "PATH: $(command -v topo-run)"; exit 1; }
  [ "$TOPO_RUN_HOME" = "$PREFIX" ] || { echo "TOPO_RUN_HOME=$TOPO_RUN_HOME"; exit 1; }
  [ "$(man -w topo-run)" = "$PREFIX/share/man/man1/topo-run.1" ] || { echo "man -w topo-run: $(man -w topo-run)"; exit 1; }
  [ "$(man -w 7 topo-run)" = "$PREFIX/share/man/man7/topo-run.7" ] || { echo "man -w 7 topo-run: $(man -w 7 topo-run)"; exit 1; }
  man -w ls >/dev/null || { echo "man ls is gone: MANPATH=$MANPATH"; exit 1; }
  topo-run --version | grep -q "^topo-run " || exit 1
  module unload topo-run || exit 1
  ! command -v topo-run >/dev/null || { echo "still on PATH after unload"; exit 1; }
  echo loaded-and-unloaded'
LMOD_INIT=/usr/share/lmod/lmod/init/bash
for dir in share/modulefiles share/lmod; do
  if env -u MANPATH PREFIX="$PREFIX" PATH=/usr/bin:/bin bash -c "source $LMOD_INIT && module use $PREFIX/$dir && $MODULE_CHECK" \
    >"$WORK/out" 2>&1 && grep -q loaded-and-unloaded "$WORK/out"; then
    ok "Lmod: module use $dir; module load/unload topo-run"
  else
    bad "Lmod with $dir" "$(tail -4 "$WORK/out")"
  fi
done
# Environment Modules conflicts with Lmod as a Debian package: run its modulecmd.tcl from
# the unpacked package.
EM="$WORK/environment-modules"
mkdir -p "$EM"
if (cd "$EM" && apt-get download environment-modules >/dev/null 2>&1 && dpkg-deb -x environment-modules_*.deb root); then
  MODCMD=$(find "$EM/root" -name modulecmd.tcl | head -1)
  if env -u MANPATH PREFIX="$PREFIX" PATH=/usr/bin:/bin MODULEPATH="$PREFIX/share/modulefiles" bash -c \
    "module() { eval \"\$(tclsh $MODCMD bash \"\$@\")\"; }; $MODULE_CHECK" >"$WORK/out" 2>&1 \
    && grep -q loaded-and-unloaded "$WORK/out"; then
    ok "Environment Modules $(tclsh "$MODCMD" bash --version 2>&1 | awk '{print $3}'): module load/unload topo-run"
  else
    bad "Environment Modules" "$(tail -4 "$WORK/out")"
  fi
else
  bad "Environment Modules" "apt-get download environment-modules failed"
fi

# Bash completion from the installed script: valid bash, and it completes an option.
COMPLETION="$PREFIX/share/bash-completion/completions/topo-run"
if bash -n "$COMPLETION" 2>"$WORK/out" && PATH=$IPATH bash -c "source $COMPLETION
  COMP_WORDS=(topo-run --lev); COMP_CWORD=1; _topo__run topo-run --lev topo-run
  printf '%s\n' \"\${COMPREPLY[@]}\"" >"$WORK/out" 2>&1 && grep -qx -- "--levels" "$WORK/out"; then
  ok "bash completion: bash -n accepts it; topo-run --lev<TAB> gives --levels"
else
  bad "bash completion" "$(head -3 "$WORK/out")"
fi

# Every installed page renders with man -l, with nothing on stderr.
unrendered=()
for page in "$PREFIX"/share/man/man1/*.1 "$PREFIX"/share/man/man7/*.7; do
  if ! MANWIDTH=80 man -l "$page" >"$WORK/page" 2>"$WORK/page.err" \
    || [[ -s $WORK/page.err ]] || ! grep -q "NAME" "$WORK/page"; then
    unrendered+=("$(basename "$page"): $(head -1 "$WORK/page.err")")
  fi
done
pages=$(find "$PREFIX/share/man" -type f | wc -l)
if (( ${#unrendered[@]} == 0 && pages >= 8 )); then ok "man -l renders all $pages pages, nothing on stderr"
else bad "man -l" "${unrendered[@]}" "$pages pages"; fi
cd "$ROOT" || exit 1
restore_build

echo "== --uninstall"
mkdir -p "$PREFIX/etc" && echo "site settings" >"$PREFIX/etc/site.rules"
if bash "$ROOT/scripts/install.sh" --prefix "$PREFIX" --uninstall >"$WORK/out" 2>&1; then
  left=$(cd "$WORK" && find opt | sort | tr '\n' ' ')
  if [[ $left == "opt opt/topo-run opt/topo-run/etc opt/topo-run/etc/site.rules " ]]; then
    ok "--uninstall removed exactly what the install wrote ($(cat "$WORK/out" | tail -1))"
  else
    bad "--uninstall" "left: $left"
  fi
else
  bad "--uninstall" "$(tail -3 "$WORK/out")"
fi
if ! bash "$ROOT/scripts/install.sh" --prefix "$PREFIX" --uninstall >"$WORK/out" 2>&1 \
  && grep -q "no manifest" "$WORK/out"; then
  ok "--uninstall twice: refused, naming the missing manifest"
else
  bad "--uninstall twice" "$(cat "$WORK/out")"
fi

echo "== the Debian package"
if dpkg -s topo-run >/dev/null 2>&1; then
  bad "the Debian package" "a topo-run package is already installed on this machine; not touching it"
elif ! DEB=$(bash "$ROOT/scripts/package-deb.sh" --no-build 2>"$WORK/err"); then
  bad "package-deb.sh" "$(tail -3 "$WORK/err")"
else
  ok "package-deb.sh: $(basename "$DEB"), depends: $(dpkg-deb -f "$DEB" Depends)"
  if dpkg -i "$DEB" >"$WORK/out" 2>&1; then
    DEB_INSTALLED=1
    ok "dpkg -i $(basename "$DEB")"
    start_cluster 2
    run "$WORK/out" "$WORK/err" env -u TOPO_RUN_PRELOAD_LIB TOPO_RUN_STATS=1 \
      srun -N2 -n4 --exclusive --cpu-bind=cores /usr/bin/topo-run --show \
      --network-map /usr/share/topo-run/examples/slurm-maps/dev-cluster.yaml -- "$HELLO"
    if [[ $RC -eq 0 ]] && (( $(grep -c '^OK rank' "$WORK/out") == 4 )) \
      && grep -Eq "topo-run: stats: rank 0.*MPI_Allreduce: [1-9][0-9]* topo-run" "$WORK/err"; then
      ok "from the package: srun /usr/bin/topo-run -- mpi-hello (preloaded from /usr/lib/topo-run)"
    else
      bad "from the package: srun topo-run -- mpi-hello" "exit $RC" "$(grep -v '^rank' "$WORK/err" | head -4)"
    fi
    stop_cluster
    if [[ $(man -w topo-run 2>/dev/null) == /usr/share/man/man1/topo-run.1* ]]; then
      ok "from the package: man topo-run"
    else
      bad "from the package: man topo-run" "$(man -w topo-run 2>&1)"
    fi
    if dpkg -r topo-run >"$WORK/out" 2>&1 && [[ ! -e /usr/bin/topo-run && ! -e /usr/lib/topo-run ]]; then
      DEB_INSTALLED=0
      ok "dpkg -r topo-run: nothing left in /usr/bin or /usr/lib/topo-run"
    else
      bad "dpkg -r topo-run" "$(tail -3 "$WORK/out")"
    fi
  else
    bad "dpkg -i" "$(tail -5 "$WORK/out")"
  fi
fi

summary

# Sourced by scripts/bench_cuda_gru.sh and scripts/bench_cuda_linear.sh; not run itself.
# find_cuda_bench BUILD-DIR TARGET: sets $bench to BUILD-DIR/test/TARGET (a build tree) or BUILD-DIR/bin/TARGET
#   (a pack of scripts/gpu_pack.sh), or says how to build it (on stderr, naming the calling script) and exits 1.
find_cuda_bench() {
  bench="$1/test/$2"
  if [[ ! -x "$bench" && -x "$1/bin/$2" ]]; then bench="$1/bin/$2"; fi
  if [[ ! -x "$bench" ]]; then
    echo "$(basename "$0"): $bench not found; build it with: cmake --build $1 --target $2" >&2
    exit 1
  fi
}

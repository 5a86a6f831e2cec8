# Sourced by the static CUDA checks (check_cuda_spills.sh, check_ptx_dequant.sh, check_ptx_persistent.sh); not run
# itself. cuda_check_init ROOT-ARG NVCC-ARG: sets $root to ROOT-ARG or the repository root; $nvcc to NVCC-ARG, else
# $NVCC, else nvcc on PATH, else /usr/local/cuda/bin/nvcc, and says so (on stderr, naming the calling script) and
# exits 1 when that is not executable; $work to a scratch folder removed on exit.
cuda_check_init() {
  root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
  nvcc="${2:-${NVCC:-}}"
  if [[ -z "$nvcc" ]]; then
    if command -v nvcc >/dev/null 2>&1; then nvcc=$(command -v nvcc); else nvcc=/usr/local/cuda/bin/nvcc; fi
  fi
  if [[ ! -x "$nvcc" ]]; then
    echo "$(basename "$0" .sh): nvcc not found (looked for \$NVCC, PATH and /usr/local/cuda/bin/nvcc)" >&2
    exit 1
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}

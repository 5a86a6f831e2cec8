# Sourced by scripts/gptq_clients_check.sh and scripts/gptq_defaults_study.sh (not run by CI): makes the
# private venv with the GPTQ clients qgru's checkpoints were checked against, pinned, and sets $venv_python.
# The venv lives in $QGRU_CLIENTS_VENV (default: $QGRU_BUILD_DIR or build/, then gptq-clients-venv). PyPI's
# torch wheel pulls the CUDA runtime packages (about 4 GB on disk); GPTQModel runs on the CPU without them
# being used. GPTQModel is a source distribution of pure Python (its kernels compile on first use, and the
# CPU path needs none): it installs without nvcc.
clients_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
clients_build="${QGRU_BUILD_DIR:-$clients_root/build}"
venv="${QGRU_CLIENTS_VENV:-$clients_build/gptq-clients-venv}"
clients_pins=(torch==2.15.0 gptqmodel==7.7.0 transformers==5.24.0 optimum==2.3.0 tokenizers==0.23.3)
venv_python="$venv/bin/python"
if ! "$venv_python" -c "import gptqmodel, optimum, transformers, torch" 2>/dev/null; then
  echo "== making $venv (${clients_pins[*]})" >&2
  python3 -m venv "$venv"
  # GPTQModel's sdist builds with the venv's own setuptools (its pyproject asks for >= 84.2.1, < 85).
  "$venv/bin/pip" install --quiet "${clients_pins[0]}" "setuptools>=84.2.1,<85"
  "$venv/bin/pip" install --quiet --no-build-isolation "${clients_pins[@]}"
fi
qgru_binary="$clients_build/apps/qgru/qgru"
[ -x "$qgru_binary" ] || { echo "no $qgru_binary: build qgru first (scripts/build.sh)" >&2; exit 1; }

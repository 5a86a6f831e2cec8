"""onnx and onnxruntime for the repository's ONNX scripts (make_onnx_fixtures.py, check_onnx_export.py).

    from onnx_venv import run_with_onnx
    run_with_onnx(venv)   # first thing in main(): returns in a python that imports onnx, onnxruntime and numpy

When this python lacks them, a private venv is made (python3 -m venv --system-site-packages, then pip install
onnx onnxruntime from PyPI; the venv is kept for the next run) and the calling script runs again in it with the same
arguments. The venv's python is a symlink to the system one, so the two are told apart by sys.prefix.
"""
import os
import subprocess
import sys

DEFAULT_VENV = "/tmp/qgru-onnx-venv"


def run_with_onnx(venv=DEFAULT_VENV):
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import numpy  # noqa: F401
        return
    except ImportError:
        if os.path.abspath(sys.prefix) == os.path.abspath(venv):
            raise  # already in the venv: the install did not give the modules
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True)
    subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "onnx", "onnxruntime"], check=True)
    sys.exit(subprocess.run([python, os.path.abspath(sys.argv[0]), *sys.argv[1:]]).returncode)

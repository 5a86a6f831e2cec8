"""The PyTorch checks (scripts/test_python_torch.sh; not in CI: PyPI's torch is gigabytes). torch is imported
unconditionally: without it these tests fail, they never skip."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from conftest import cli, digits, run_cli  # noqa: E402,F401  (the shared fixtures)

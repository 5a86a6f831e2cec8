"""The PyTorch checks (scripts/test_python_torch.sh; not in CI: PyPI's torch is gigabytes). torch is imported
unconditionally: without it these tests fail, they never skip. The fixtures are python/tests/conftest.py's."""

import importlib.util
import os

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "conftest.py")
_spec = importlib.util.spec_from_file_location("qgru_tests_conftest", _path)
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)

ROOT, cli, digits, run_cli = _shared.ROOT, _shared.cli, _shared.digits, _shared.run_cli

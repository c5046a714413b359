"""Puts :mod:`tests.thread_imports`' recorder into every Python process of a run.

Python imports ``sitecustomize`` at start-up from its path; a test that puts this directory on
``PYTHONPATH`` and names a report file in ``INA_THREAD_IMPORTS`` gets the recorder in the
process it starts and in every Python process that one starts (they inherit the
environment): switches, controllers, the hosts' workers. Without the variable it does
nothing.
"""

import importlib.util
import os
import sys
from pathlib import Path

_REPORT = os.environ.get("INA_THREAD_IMPORTS")
if _REPORT:
    _NAME = "_ina_thread_imports"
    _spec = importlib.util.spec_from_file_location(
        _NAME, Path(__file__).resolve().parent.parent / "thread_imports.py")
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
    _module.ThreadImportRecorder(Path(_REPORT)).install()

"""`python -m llama_cpp.server`, with llama.cpp's extra CPU buffer types off.

Used to record tests/fixtures/real_servers/llama_cpp_python_*.json: on a CPU that reports
AMX inside a VM that does not enable it, llama.cpp's AMX weight repacking faults on its
first tile instruction (`ldtilecfg`) and the server dies on its first request.
`llama-server --no-repack` turns that off; llama-cpp-python has no setting for it, so this
sets `llama_model_params.use_extra_bufts = False` and starts the same server (the HTTP
handling, request validation and replies are the package's own).

    python scripts/llama_cpp_python_server.py --model MODEL.gguf --n_ctx 8192 --port 8090
"""

from __future__ import annotations

import runpy
import sys
from typing import Any

import llama_cpp
import llama_cpp.llama_cpp as native

_default_model_params = native.llama_model_default_params


def _model_params_without_extra_buffer_types() -> Any:
    params = _default_model_params()
    params.use_extra_bufts = False
    return params


native.llama_model_default_params = _model_params_without_extra_buffer_types
llama_cpp.llama_model_default_params = _model_params_without_extra_buffer_types

if __name__ == "__main__":
    sys.argv[0] = "llama_cpp.server"
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)

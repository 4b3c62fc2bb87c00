#!/usr/bin/env bash
# Installs everything the test suite needs on a clean Debian/Ubuntu machine (CPU is enough).
#   apt: ffmpeg (test media, fast audio extraction), sox + espeak-ng (synthetic speech and tones),
#        chromium (renders the HTML report in a real browser in tests)
#   pip: torch + torchvision (transformers' Qwen2.5-Omni video processor needs torchvision; these
#        two versions import together on CPU), then this package with its dev and decord extras.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends ffmpeg sox espeak-ng chromium >/dev/null
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.14.1 torchvision==0.29.1
# verl for training code and its CPU tests; not verl[vllm], which pins an older torch and transformers
python -m pip install -q "verl[verl-core]==0.9.1"
python -m pip install -q -e ".[dev,decord]"

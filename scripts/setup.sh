#!/usr/bin/env bash
# Create .venv (if absent) and install csan with its dev tools, editable.
#
# torch is a normal dependency (torch>=2.4). Where pip is configured with a local folder of wheels
# (find-links) that holds a CPU build of torch, as on the project's CI machines, that exact build is
# pinned so that pip does not download a newer CUDA build of several GB instead.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)

links=$(.venv/bin/python -m pip config list 2>/dev/null | sed -n "s/.*find-links='\(.*\)'/\1/p" | tr ' ' '\n')
links="$links ${PIP_FIND_LINKS:-}"
wheel=""
for dir in $links; do
  dir=${dir#file://}
  [ -d "$dir" ] || continue
  wheel=$(ls "$dir"/torch-*+cpu-*.whl 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$wheel" ] && break
done
constraints=()
if [ -n "$wheel" ]; then
  version=$(basename "$wheel" | cut -d- -f2)
  echo "setup: using the local CPU build of torch $version ($wheel)"
  printf 'torch==%s\n' "${version%%+*}" > .venv/constraints.txt
  constraints=(-c .venv/constraints.txt)
fi
"${pip[@]}" "${constraints[@]}" -e ".[dev]" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import csan, torch; print(f'setup: csan {csan.__version__}, torch {torch.__version__} in .venv')"

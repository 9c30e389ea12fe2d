#!/usr/bin/env bash
# Build the website from the outputs stored in the notebooks (nothing is executed).
#
#   bash scripts/build_book.sh          # -> _build/html/index.html
#
# Warnings are errors (-W) and every cross-reference must resolve (-n): a page
# that builds with a warning usually shows the reader something broken. MathJax
# and the widget renderer come from node_modules/ (installed here by `npm ci`
# from package-lock.json) and are copied into the build, so the site needs no
# network. Fails if the build takes longer than BOOK_BUILD_LIMIT seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

limit="${BOOK_BUILD_LIMIT:-180}"

if [ ! -d node_modules/mathjax ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

rm -rf _build/html _build/.doctrees
start=$(date +%s)
jupyter-book build . --all -W -n --keep-going --builder html
elapsed=$(( $(date +%s) - start ))
echo "book build: ${elapsed} s (limit ${limit} s)"
if [ "$elapsed" -gt "$limit" ]; then
  echo "book build took ${elapsed} s, over the ${limit} s limit" >&2
  exit 1
fi

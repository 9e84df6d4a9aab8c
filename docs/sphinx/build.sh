#!/usr/bin/env bash
# Build the collection's documentation site: antsibull-docs writes the RST of every plugin, role and guide
# (docs/docsite/), Sphinx turns it into HTML with every warning an error. No network is used.
#   docs/sphinx/build.sh <collections path> <output directory>
# antsibull-docs, Sphinx and ansible-core come from docs/sphinx/requirements.txt (make docs installs them).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
collections="$1"
out="$2"
rst="$out/rst"

rm -rf "$rst" "$out/html" "$out/doctrees"
mkdir -p "$rst"
cp "$here/index.rst" "$here/ansible_references.rst" "$rst/"
chmod og-w "$rst"  # antsibull-docs wants that directory only writable by itself
# the collections it depends on (kubernetes.core's doc fragments) come from the caller's collections path
ANSIBLE_COLLECTIONS_PATH="$collections${ANSIBLE_COLLECTIONS_PATH:+:$ANSIBLE_COLLECTIONS_PATH}" antsibull-docs \
    --config-file "$here/antsibull-docs.cfg" \
    collection \
    --use-current \
    --fail-on-error \
    --dest-dir "$rst" \
    inferops.vllm_dr
# antsibull-docs title-cases the collection's name (Inferops.Vllm_Dr); the page says it as it is written
sed -i '0,/^Inferops\.Vllm_Dr$/s//inferops.vllm_dr/' "$rst/collections/inferops/vllm_dr/index.rst"
# The guides kept as Markdown beside the code (docs/*.md, also read on the repository's own pages) join the site as
# they are: copied into the build, never kept twice; myst_parser reads them (conf.py)
mkdir -p "$rst/guides"
cp "$here/../runbook.md" "$here/../aap.md" "$rst/guides/"
# -W: warnings are errors; -n: every reference must resolve; -E: no stale environment
sphinx-build -b html -W --keep-going -n -E -q -c "$here" -d "$out/doctrees" "$rst" "$out/html"
echo "site: $out/html/index.html"

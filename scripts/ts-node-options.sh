# Sourced by the test scripts: the Node options that run the project's TypeScript with Node's own
# type transform and devstack/tsLoader.ts instead of tsx — ~1 s of CPU less for each of the
# hundreds of processes a suite starts (test files, and the simulators and workers they start,
# which run the way their parent does: src/runtime/typescriptChild.ts). npm test went 294 → 236 s
# on this 2-core machine with it (same checkout, one run each).
# shellcheck disable=SC2034 # used by the scripts that source this file
TS_NODE_OPTIONS=(--experimental-transform-types --disable-warning=ExperimentalWarning --import ./devstack/tsLoader.ts)

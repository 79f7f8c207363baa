/**
 * Installs the pinned Temporal time-skipping test server into .tools/ (what the workflow tests do
 * on first use), e.g. to fill a CI cache ahead of the tests: `npx tsx scripts/test-server/install.ts`.
 */
import { TEST_SERVER_VERSION, ensureTestServer } from '../../testkit/testServer.js';

const install = await ensureTestServer((line) => console.log(line));
console.log(
  install.installedInMs > 0
    ? `temporal-test-server ${TEST_SERVER_VERSION} installed in ${install.dir} (${install.installedInMs} ms)`
    : `temporal-test-server ${TEST_SERVER_VERSION} already installed in ${install.dir}`,
);

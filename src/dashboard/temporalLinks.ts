/** Temporal Web UI addresses for one card: every execution (under its workflow id, or its batch runs), and one run. */

const trimBase = (baseUrl: string): string => baseUrl.replace(/\/+$/, '');

/** The namespace's workflow list filtered by a visibility query. */
export function workflowQueryUrl(baseUrl: string, namespace: string, query: string): string {
  return `${trimBase(baseUrl)}/namespaces/${encodeURIComponent(namespace)}/workflows?query=${encodeURIComponent(query)}`;
}

/** The namespace's workflow list filtered to the card's workflow id (every run of the card). */
export function workflowListUrl(baseUrl: string, namespace: string, workflowId: string): string {
  return workflowQueryUrl(baseUrl, namespace, `WorkflowId="${workflowId}"`);
}

/** Prefix of one run's page; the page appends `<runId>/history`. */
export function runUrlPrefix(baseUrl: string, namespace: string, workflowId: string): string {
  return `${trimBase(baseUrl)}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}/`;
}

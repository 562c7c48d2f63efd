import { api } from '../api';
import { CopyButton, DataTable, Empty, ErrorNotice, Loading, Page, Section, Stat, Status } from '../components/ui';
import { money, percent, short } from '../format';
import { useAsync } from '../hooks';
import { Link } from '../router';
import type { DownloadsInfo, NodeEarnings, NodeSummary, ServiceConfig } from '../types';

/**
 * The commands that install the node agent from this server's signed tarball and start a node
 * against it (docs/node-operator.md), as `GET /api/v1/downloads` lists them. The key is read from
 * the environment so that it stays out of the process list and the shell history.
 */
export function startCommand(serverUrl: string, tarballUrl: string): string {
  return [
    `npm install -g ${tarballUrl}   # svc, the node agent (needs Node.js 20 and npm)`,
    'export SVC_NODE_API_KEY=svc_live_...   # an operator key from API keys',
    `svc node doctor --server ${serverUrl}   # checks this machine, one line per check`,
    `svc node --server ${serverUrl} --country CA --region ca-central \\`,
    '  --upstream http://127.0.0.1:11434/v1 --model tinyllama',
  ].join('\n');
}

function lastSeen(unixSeconds: number): string {
  if (!unixSeconds) return 'never';
  const s = Math.max(0, Math.round(Date.now() / 1000 - unixSeconds));
  return s < 60 ? `${s} s ago` : s < 3600 ? `${Math.floor(s / 60)} min ago` : `${Math.floor(s / 3600)} h ago`;
}

export function NodesPage() {
  const nodes = useAsync(
    (signal) =>
      api<{ nodes: NodeSummary[]; total: number }>('/api/v1/nodes', { query: { scope: 'mine', limit: 200 }, signal }),
    [],
    { pollMs: 10_000 },
  );
  const earnings = useAsync((signal) => api<NodeEarnings>('/api/v1/nodes/earnings', { signal }), []);
  const config = useAsync((signal) => api<ServiceConfig>('/api/v1/config', { signal }), []);
  const earned = new Map((earnings.data?.nodes ?? []).map((n) => [n.node_id, n]));
  const list = nodes.data?.nodes ?? [];
  const online = list.filter((n) => n.status === 'online').length;
  const downloads = useAsync((signal) => api<DownloadsInfo>('/api/v1/downloads', { signal }), []);
  const serverUrl = config.data?.public_url ?? window.location.origin;
  const agent = downloads.data?.agent;
  const command = agent ? startCommand(serverUrl, agent.url) : undefined;
  return (
    <Page
      title="Nodes"
      intro="Machines your organization runs for the marketplace and the gateway, and what they earned."
    >
      <Section title="Your nodes">
        <dl class="stats">
          <Stat label="Nodes" value={nodes.data ? String(nodes.data.total) : '…'} note={`${online} online`} />
          <Stat
            label="Earned"
            value={earnings.data ? money(earnings.data.total_cents) : '…'}
            note="after the platform fee"
          />
        </dl>
        <ErrorNotice error={nodes.error ?? earnings.error} />
        {nodes.loading && !nodes.data && <Loading what="nodes" />}
        {nodes.data && list.length === 0 && <Empty>No node yet: start one with the command below.</Empty>}
        {list.length > 0 && (
          <DataTable
            caption="Nodes of the organization"
            testId="nodes"
            columns={[
              'Node',
              'Status',
              'Country',
              'GPU',
              'Models',
              { label: 'Load', numeric: true },
              'Last seen',
              { label: 'Earned', numeric: true },
            ]}
          >
            {list.map((n) => (
              <tr key={n.node_id} data-node={n.node_id}>
                <td>
                  {n.name || <code>{short(n.node_id, 8)}</code>}
                  {n.name && (
                    <span class="muted small">
                      {' '}
                      <code>{short(n.node_id, 8)}</code>
                    </span>
                  )}
                </td>
                <td>
                  <Status value={n.status} /> {n.status === 'online' && <Status value={n.availability} />}
                </td>
                <td>
                  {n.country || '—'}
                  {n.region && <span class="muted small"> {n.region}</span>}
                </td>
                <td>{n.gpu_model || <span class="muted">CPU only · {n.cpu_cores} cores</span>}</td>
                <td>{n.models.join(', ') || '—'}</td>
                <td class="num">{percent(n.load)}</td>
                <td>{lastSeen(n.last_seen)}</td>
                <td class="num">
                  {money(earned.get(n.node_id)?.earned_cents ?? 0)}
                  <span class="muted small"> · {earned.get(n.node_id)?.work_items ?? 0} paid</span>
                </td>
              </tr>
            ))}
          </DataTable>
        )}
      </Section>
      <Section title="Start a node">
        <ol>
          <li>
            Create a key with the <code>operator</code> scope under <Link href="/keys">API keys</Link>.
          </li>
          <li>On the machine, with Node.js 20 or later and npm, run:</li>
        </ol>
        <ErrorNotice error={downloads.error} />
        {command && (
          <>
            <pre class="command" data-testid="start-command">
              <code>{command}</code>
            </pre>
            <CopyButton text={command} label="Copy the commands that install and start a node" />
            <p class="muted small" data-testid="agent-download">
              {agent?.sha256 ? (
                <>
                  svc {downloads.data?.version}: SHA-256 <code>{agent.sha256}</code>, signed by the platform key; check
                  a download with <code>svc verify-download FILE --server {serverUrl}</code>.
                </>
              ) : (
                <>The tarball is not ready yet: {agent?.reason}</>
              )}
            </p>
          </>
        )}
        <p class="muted small">
          Point <code>--upstream</code> at any OpenAI-compatible server (Ollama, vLLM, llama.cpp) and name each
          catalogue model it serves with <code>--model</code>; add <code>--allow-process-runner</code> to take CPU and
          GPU compute jobs. The node's key stays in its <code>--data-dir</code>.
        </p>
      </Section>
    </Page>
  );
}

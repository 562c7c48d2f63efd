import { api } from '../api';
import { CopyButton, DataTable, Empty, ErrorNotice, Loading, Page, Section, Stat, Status } from '../components/ui';
import { money, percent, short } from '../format';
import { useAsync } from '../hooks';
import { Link } from '../router';
import type { NodeEarnings, NodeSummary, ServiceConfig } from '../types';

/**
 * The command that starts a node against this server (docs/node-operator.md). The key is read
 * from the environment so that it stays out of the process list and the shell history.
 */
export function startCommand(serverUrl: string): string {
  return [
    'export SVC_NODE_API_KEY=svc_live_...   # an operator key from API keys',
    `npx svc node --server ${serverUrl} --country CA --region ca-central \\`,
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
  const serverUrl = config.data?.public_url ?? window.location.origin;
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
          <li>
            On the machine, in a checkout of SVC after <code>npm install</code>, run:
          </li>
        </ol>
        <pre class="command" data-testid="start-command">
          <code>{startCommand(serverUrl)}</code>
        </pre>
        <CopyButton text={startCommand(serverUrl)} label="Copy the command that starts a node" />
        <p class="muted small">
          Point <code>--upstream</code> at any OpenAI-compatible server (Ollama, vLLM, llama.cpp) and name each
          catalogue model it serves with <code>--model</code>; add <code>--allow-process-runner</code> to take CPU and
          GPU compute jobs. The node's key stays in its <code>--data-dir</code>.
        </p>
      </Section>
    </Page>
  );
}

import { useState } from 'preact/hooks';
import { Upload } from 'tus-js-client';
import { api } from '../api';
import { Button, DataTable, Empty, ErrorNotice, Field, Loading, Page, Section, Status } from '../components/ui';
import { when } from '../format';
import { text, useAsync, useFormAction } from '../hooks';
import { Link, navigate } from '../router';
import { sessionToken } from '../session';

/** Sites, epochs and capture sets (docs/capture-sets.md), with resumable uploads through tus. */

interface Site {
  id: string;
  name: string;
  country: string | null;
  created_at: string;
}
interface Epoch {
  id: string;
  site_id: string;
  label: string;
  created_at: string;
}
interface CaptureSet {
  id: string;
  status: string;
  failure_reason: string | null;
  raw_bytes: number;
  total_files: number;
  created_at: string;
}
interface CaptureFile {
  path: string;
  bytes: number;
  bytes_received: number;
  verification: string;
}
interface CaptureSetResponse {
  capture_set: CaptureSet;
  epoch: Epoch;
  site: Site;
  files: CaptureFile[];
}

const hex = (buf: ArrayBuffer) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('');

export function SitesPage() {
  const sites = useAsync((signal) => api<{ sites: Site[] }>('/api/v1/sites', { signal }), []);
  const create = useFormAction(async (data, form) => {
    const country = text(data, 'country').toUpperCase();
    const site = await api<Site>('/api/v1/sites', {
      body: { name: text(data, 'name'), ...(country ? { country } : {}) },
    });
    form.reset();
    navigate(`/capture/sites/${site.id}`);
  });
  return (
    <Page title="Capture" intro="Sites, their epochs (captures at a point in time) and the uploaded capture sets.">
      <Section title="New site">
        <form onSubmit={create.onSubmit}>
          <Field label="Site name">{(id) => <input id={id} name="name" required maxLength={200} />}</Field>
          <Field label="Country (optional)" hint="Two letters, e.g. CA.">
            {(id, hint) => <input id={id} name="country" maxLength={2} aria-describedby={hint} />}
          </Field>
          <ErrorNotice error={create.error} prefix="Could not create the site" />
          <Button type="submit" variant="primary" busy={create.busy}>
            Create site
          </Button>
        </form>
      </Section>
      <Section title="Sites">
        <ErrorNotice error={sites.error} />
        {sites.loading && !sites.data && <Loading what="sites" />}
        {sites.data && sites.data.sites.length === 0 && <Empty>No sites yet.</Empty>}
        {sites.data && sites.data.sites.length > 0 && (
          <DataTable caption="Sites" columns={['Site', 'Country', 'Created']}>
            {sites.data.sites.map((s) => (
              <tr key={s.id}>
                <td>
                  <Link href={`/capture/sites/${s.id}`}>{s.name}</Link>
                </td>
                <td>{s.country ?? '—'}</td>
                <td>{when(s.created_at)}</td>
              </tr>
            ))}
          </DataTable>
        )}
      </Section>
    </Page>
  );
}

export function SitePage(props: { id: string }) {
  const site = useAsync((signal) => api<Site>(`/api/v1/sites/${props.id}`, { signal }), [props.id]);
  const epochs = useAsync(
    (signal) => api<{ epochs: Epoch[] }>(`/api/v1/sites/${props.id}/epochs`, { signal }),
    [props.id],
  );
  const create = useFormAction(async (data, form) => {
    const epoch = await api<Epoch>(`/api/v1/sites/${props.id}/epochs`, { body: { label: text(data, 'label') } });
    form.reset();
    navigate(`/capture/epochs/${epoch.id}`);
  });
  return (
    <Page title={site.data ? `Site ${site.data.name}` : 'Site'}>
      <ErrorNotice error={site.error ?? epochs.error} />
      <Section title="New epoch">
        <form onSubmit={create.onSubmit}>
          <Field label="Epoch label" hint="e.g. 2026-Q4.">
            {(id, hint) => <input id={id} name="label" required maxLength={200} aria-describedby={hint} />}
          </Field>
          <ErrorNotice error={create.error} prefix="Could not create the epoch" />
          <Button type="submit" variant="primary" busy={create.busy}>
            Create epoch
          </Button>
        </form>
      </Section>
      <Section title="Epochs">
        {epochs.data && epochs.data.epochs.length === 0 && <Empty>No epochs yet.</Empty>}
        {epochs.data && epochs.data.epochs.length > 0 && (
          <DataTable caption="Epochs of the site" columns={['Epoch', 'Created']}>
            {epochs.data.epochs.map((e) => (
              <tr key={e.id}>
                <td>
                  <Link href={`/capture/epochs/${e.id}`}>{e.label}</Link>
                </td>
                <td>{when(e.created_at)}</td>
              </tr>
            ))}
          </DataTable>
        )}
      </Section>
    </Page>
  );
}

/** Sends one file through tus, resuming from where the server stands if the connection drops (retries). */
function uploadFile(setId: string, file: File, path: string, onProgress: (sent: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const upload = new Upload(file, {
      endpoint: `${window.location.origin}/api/v1/capture-sets/${setId}/uploads`,
      headers: { authorization: `Bearer ${sessionToken() ?? ''}` },
      metadata: { path, filename: file.name },
      chunkSize: 16 * 1024 * 1024,
      retryDelays: [0, 1000, 3000, 5000, 10000],
      storeFingerprintForResuming: true,
      removeFingerprintOnSuccess: true,
      onProgress: (sent) => onProgress(sent),
      onError: reject,
      onSuccess: () => resolve(),
    });
    void upload.findPreviousUploads().then((previous) => {
      const first = previous[0];
      if (first) upload.resumeFromPreviousUpload(first);
      upload.start();
    });
  });
}

function NewCaptureSet(props: { epochId: string; onChange: () => void }) {
  const [progress, setProgress] = useState<Record<string, { sent: number; total: number }>>({});
  const create = useFormAction(async (data, form) => {
    const input = form.querySelector<HTMLInputElement>('input[type=file]');
    const files = [...(input?.files ?? [])];
    if (files.length === 0) throw new Error('Choose at least one file.');
    // The manifest: each file's path, size and SHA-256, computed here before anything is sent.
    const entries = await Promise.all(
      files.map(async (f) => ({
        file: f,
        path: f.webkitRelativePath || f.name,
        sha256: hex(await crypto.subtle.digest('SHA-256', await f.arrayBuffer())),
      })),
    );
    const created = await api<CaptureSetResponse>('/api/v1/capture-sets', {
      body: {
        site_epoch_id: props.epochId,
        source_type: text(data, 'source_type') || undefined,
        manifest: {
          version: '1',
          files: entries.map((e) => ({
            path: e.path,
            bytes: e.file.size,
            sha256: e.sha256,
            content_type: e.file.type || 'application/octet-stream',
          })),
        },
      },
    });
    props.onChange();
    const id = created.capture_set.id;
    setProgress(Object.fromEntries(entries.map((e) => [e.path, { sent: 0, total: e.file.size }])));
    for (const e of entries) {
      await uploadFile(id, e.file, e.path, (sent) =>
        setProgress((p) => ({ ...p, [e.path]: { sent, total: e.file.size } })),
      );
    }
    const done = await api<CaptureSetResponse>(`/api/v1/capture-sets/${id}/complete`, { body: {} });
    props.onChange();
    form.reset();
    return `Capture set ${id}: ${done.capture_set.status}${done.capture_set.failure_reason ? ` (${done.capture_set.failure_reason})` : ''}`;
  });
  return (
    <Section title="New capture set">
      <form onSubmit={create.onSubmit}>
        <Field label="Files" hint="Each file's SHA-256 is computed here; uploads resume after a dropped connection.">
          {(id, hint) => <input id={id} name="files" type="file" multiple required aria-describedby={hint} />}
        </Field>
        <Field label="Source type (optional)" hint="e.g. drone, lidar.">
          {(id, hint) => <input id={id} name="source_type" maxLength={200} aria-describedby={hint} />}
        </Field>
        <ErrorNotice error={create.error} prefix="Could not upload the capture set" />
        <Button type="submit" variant="primary" busy={create.busy}>
          Create and upload
        </Button>
      </form>
      {Object.entries(progress).map(([path, p]) => (
        <p key={path}>
          <label>
            {path} <progress value={p.sent} max={p.total || 1} aria-label={`Upload of ${path}`} />{' '}
            {p.total ? Math.floor((p.sent / p.total) * 100) : 100} %
          </label>
        </p>
      ))}
      {create.done && (
        <p role="status" data-testid="capture-done">
          {create.done}
        </p>
      )}
    </Section>
  );
}

export function EpochPage(props: { id: string }) {
  const sets = useAsync(
    (signal) =>
      api<{ capture_sets: CaptureSet[]; epoch: Epoch; site: Site }>(`/api/v1/epochs/${props.id}/capture-sets`, {
        signal,
      }),
    [props.id],
  );
  return (
    <Page title={sets.data ? `Epoch ${sets.data.epoch.label} of ${sets.data.site.name}` : 'Epoch'}>
      <ErrorNotice error={sets.error} />
      <NewCaptureSet epochId={props.id} onChange={sets.reload} />
      <Section title="Capture sets">
        {sets.data && sets.data.capture_sets.length === 0 && <Empty>No capture sets yet.</Empty>}
        {sets.data && sets.data.capture_sets.length > 0 && (
          <DataTable
            caption="Capture sets of the epoch"
            columns={[
              'Capture set',
              'Status',
              { label: 'Files', numeric: true },
              { label: 'Bytes', numeric: true },
              'Created',
            ]}
            testId="capture-sets"
          >
            {sets.data.capture_sets.map((c) => (
              <tr key={c.id} data-capture-set={c.id}>
                <td>
                  <code>{c.id}</code>
                </td>
                <td>
                  <Status value={c.status} /> {c.failure_reason && <span class="small muted">{c.failure_reason}</span>}
                </td>
                <td class="num">{c.total_files}</td>
                <td class="num">{c.raw_bytes}</td>
                <td>{when(c.created_at)}</td>
              </tr>
            ))}
          </DataTable>
        )}
      </Section>
    </Page>
  );
}

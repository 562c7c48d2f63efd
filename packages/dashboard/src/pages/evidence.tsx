import { verifyBundle, type BundleVerification, type TrustedKey } from '@svc/protocol/verify';
import { useState } from 'preact/hooks';
import { api, request, saveBlob } from '../api';
import { EvidenceGraphView } from '../components/evidence-graph';
import { Button, ErrorNotice, Loading, Section } from '../components/ui';
import { short, when } from '../format';
import { useAction, useAsync } from '../hooks';
import type { EvidenceGraph, PlatformKey } from '../types';

/** The platform's published signing keys, pinned for the certificate check, and its log's note keys. */
async function platformKeys(): Promise<{ keys: TrustedKey[]; logKeys: string[] }> {
  const body = await api<{ keys: PlatformKey[]; log?: { verifier_keys?: string[] } }>('/api/v1/keys/platform', {
    anonymous: true,
  });
  return {
    keys: body.keys.map((k) => ({
      public_key_hex: k.public_key_hex,
      key_id: k.key_id,
      valid_from: k.valid_from,
      valid_until: k.valid_until,
    })),
    logKeys: body.log?.verifier_keys ?? [],
  };
}

/** Runs the shared verifier (`@svc/protocol/verify`, WebCrypto) here, in the browser. */
async function verifyHere(text: string): Promise<BundleVerification> {
  if (!globalThis.crypto?.subtle) {
    throw new Error(
      'This browser offers no WebCrypto here: in-browser verification needs a secure context (https, or localhost). Download the bundle and run svc verify instead.',
    );
  }
  const { keys, logKeys } = await platformKeys();
  return verifyBundle(text, { trustedKeys: keys, trustedLogKeys: logKeys });
}

function Checks(props: { result: BundleVerification; source: string }) {
  const failed = props.result.checks.filter((c) => !c.ok).length;
  // A log entry that is absent (a bundle from before the log) or pending is neither a pass nor a failure.
  const unchecked = props.result.checks.find((c) => c.status !== undefined && c.ok);
  return (
    <div
      class={`verification ${props.result.ok ? 'good' : 'bad'}`}
      data-testid="verification"
      data-ok={String(props.result.ok)}
    >
      <p role="status" class="verdict" data-testid="verdict">
        {props.result.ok
          ? unchecked
            ? `Verified in this browser: ${props.result.checks.length - 1} checks passed; the log entry is ${String(unchecked.status)} (${props.source}).`
            : `Verified in this browser: all ${props.result.checks.length} checks passed (${props.source}).`
          : `Verification failed: ${failed} of ${props.result.checks.length} checks failed (${props.source}).`}
      </p>
      <ul class="checks">
        {props.result.checks.map((c, i) => (
          <li key={`${c.name}-${i}`} data-check={c.name} data-ok={String(c.ok)} data-status={c.status}>
            <span class={`badge ${c.status ? 'warn' : c.ok ? 'good' : 'bad'}`}>
              {c.status ?? (c.ok ? 'pass' : 'fail')}
            </span>{' '}
            <code>{c.name}</code> <span class="small wrap">{c.reason}</span>
          </li>
        ))}
      </ul>
    </div>
  );
}

/**
 * The job's evidence: its graph drawn, the certificate, the bundle to download, and the bundle
 * verified here by the same verifier `svc verify` uses, check by check. A bundle file from
 * anywhere can be verified too.
 */
export function EvidenceSection(props: {
  jobId: string;
  status: string;
  /** Where the bundle comes from (a work order's carries its `work_order` section). */ bundlePath?: string;
}) {
  const graph = useAsync(
    (signal) => api<EvidenceGraph>(`/api/v1/jobs/${props.jobId}/evidence`, { signal }),
    [props.jobId, props.status],
  );
  const [result, setResult] = useState<{ verification: BundleVerification; source: string } | undefined>(undefined);
  const bundleText = async () =>
    (await request(props.bundlePath ?? `/api/v1/jobs/${props.jobId}/evidence/bundle`)).text();
  const download = useAction(async () =>
    saveBlob(new Blob([await bundleText()], { type: 'application/json' }), `${props.jobId}-evidence-bundle.json`),
  );
  const verify = useAction(async () =>
    setResult({
      verification: await verifyHere(await bundleText()),
      source: 'the bundle the server gave for this job',
    }),
  );
  const verifyFile = useAction(async (file: File) =>
    setResult({ verification: await verifyHere(await file.text()), source: `file ${file.name}` }),
  );
  const g = graph.data;
  return (
    <Section title="Evidence">
      <ErrorNotice error={graph.error} prefix="Evidence graph" />
      {!g && !graph.error && <Loading what="the evidence graph" />}
      {g && (
        <>
          <dl class="kv small" data-testid="certificate">
            <dt>Run</dt>
            <dd>
              <code>{g.run.id}</code> · {g.run.status}
            </dd>
            <dt>Root hash</dt>
            <dd>
              <code title={g.certificate.root_hash ?? undefined}>{short(g.certificate.root_hash || '—', 16)}</code>
            </dd>
            <dt>Certificate</dt>
            <dd>
              {g.certificate.signed
                ? `${g.certificate.algorithm} ${g.certificate.version}, signed ${when(g.certificate.signed_at)} by ${short(g.certificate.signer_public_key_hex ?? '—', 8)}; the server says it ${g.certificate.verified ? 'verifies' : 'does NOT verify'}`
                : 'not signed yet: the run is signed when the job reaches a terminal state'}
            </dd>
          </dl>
          <EvidenceGraphView graph={g} />
        </>
      )}
      <div class="actions">
        <Button onClick={() => void download.run()} busy={download.busy}>
          Download bundle
        </Button>
        <Button variant="primary" onClick={() => void verify.run()} busy={verify.busy}>
          Verify in this browser
        </Button>
        <label class="btn plain file-pick">
          Verify a bundle file…
          <input
            type="file"
            accept="application/json,.json"
            class="sr-only"
            data-testid="bundle-file"
            onChange={(e) => {
              const file = e.currentTarget.files?.[0];
              if (file) void verifyFile.run(file);
              e.currentTarget.value = '';
            }}
          />
        </label>
      </div>
      <p class="muted small">
        Verification recomputes the bundle hash, every event hash and the Merkle root, checks the platform's certificate
        against its published keys and each node's SVC1 receipt signature, that every receipt is bound to the graph, and
        the run's entry in the transparency log (its leaf, and its inclusion under a checkpoint signed by a published
        key). Offline: <code>svc verify BUNDLE.json</code>.
      </p>
      <ErrorNotice error={download.error ?? verify.error ?? verifyFile.error} />
      {result && <Checks result={result.verification} source={result.source} />}
    </Section>
  );
}

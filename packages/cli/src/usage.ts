// The usage text of each `svc` command, apart from the commands themselves: `svc help` and a
// mistyped command print them without loading any command's code (main.ts imports a command only
// when it runs, so `svc verify` never loads the server).

export const SERVE_USAGE = `svc serve [--port N] [--host H] [--data-dir DIR] [--public-url URL] [--log-level L] [--allow-private-egress]

Runs the control plane and gateway. Without DATABASE_URL the store is embedded (PGlite in DATA_DIR/pgdata).
Environment: SVC_PORT, SVC_HOST, SVC_DATA_DIR, DATABASE_URL, SVC_REDIS_URL, SVC_PUBLIC_URL, SVC_LOG_LEVEL,
SVC_METRICS_TOKEN, SVC_SIGNING_KEY, SVC_KEY_PEPPER, SVC_ALLOW_PRIVATE_EGRESS, SVC_BODY_LIMIT_BYTES,
SVC_SHUTDOWN_GRACE_MS. Flags win over the environment.`;

export const CREDITS_USAGE = `svc credits add --org ORG_ID --cents N [--description TEXT] [--data-dir DIR]

Adds N cents (a positive integer) to an organization's credit balance, as a \`topup\` row on its
ledger, and prints the new balance. Uses DATABASE_URL when set (works while the server runs);
otherwise the embedded store in DATA_DIR, which only one process may open: stop \`svc serve\` first.`;

export const PAYOUTS_USAGE = `svc payouts run [--data-dir DIR]
svc payouts mark-paid PAYOUT_ID [--ref TEXT] [--data-dir DIR]

run        pays every onboarded organization its payable earnings through the configured payment
           provider (SVC_STRIPE_SECRET_KEY for Stripe, else the local provider), when they reach
           SVC_PAYOUT_MINIMUM_CENTS, and first re-sends payouts a crash left unsent. \`svc serve\`
           runs the same every SVC_PAYOUT_INTERVAL. Safe to repeat: a payout is never paid twice.
mark-paid  records that a pending payout of the local provider was paid by hand (--ref: your bank
           transfer's reference). Prints the payout.

Uses DATABASE_URL when set (works while the server runs); otherwise the embedded store in DATA_DIR,
which only one process may open: stop \`svc serve\` first.`;

export const TOPUPS_USAGE = `svc topups confirm TOPUP_ID [--data-dir DIR]

confirm    records that a top-up through the local payment provider was really paid (you received
           the money). With \`local\`, the buyer's own checkout page adds promotional credit: it buys
           compute, but what it pays a node is never paid out. Confirming turns it into paid credit,
           once (a \`topup_confirmed\` ledger row); credit already spent stays spent as promotional.
           Stripe top-ups are confirmed by Stripe. Exit 1 for an unknown, pending, failed or already
           confirmed top-up (nothing changes). Prints the top-up.

Uses DATABASE_URL when set (works while the server runs); otherwise the embedded store in DATA_DIR,
which only one process may open: stop \`svc serve\` first.`;

export const NODE_USAGE = `svc node --server URL --api-key KEY [--data-dir DIR] [--country CC] [--region R]
         [--upstream BASE_URL [--upstream-key KEY] --model CATALOG_ID[=ENGINE_MODEL]...]
         [--gguf CATALOG_ID=PATH]... [--concurrency N] [--allow-process-runner] [--no-channel] [--name NAME]
         [--tee-vcek FILE] [--tee-collateral DIR] [--capsule PROGRAM [--capsule-arg ARG]...]
         [--runner 8=CMD] [--runner 10=CMD] [--image FILE]... [--allow-job-network]

Runs a provider node: registers with the control plane, polls for work, runs it on the given
engines and uploads each result with its signed receipt. The node key and outbox live in
DATA_DIR (default ./.svc-node). Stops cleanly on SIGTERM or SIGINT (running work gets 30 s).
Environment: SVC_NODE_API_KEY (instead of --api-key), SVC_UPSTREAM_API_KEY (instead of
--upstream-key), so that keys stay out of the process list. See docs/node-operator.md.
In a confidential VM (configfs-tsm present) the node attests after registering and every 12 h:
--tee-vcek gives the SEV-SNP VCEK when the host supplies none, --tee-collateral Intel's TDX
collateral (docs/attestation.md). --capsule runs repository work
orders (kind 9) with PROGRAM; variables named SVC_CAPSULE_<NAME> reach it as <NAME> (for the
reference capsule: SVC_CAPSULE_OPENAI_BASE_URL, SVC_CAPSULE_OPENAI_API_KEY). See
docs/node-operator.md and docs/work-orders.md. --runner 8=CMD and --runner 10=CMD process
capture sets (kind 8 scene_reconstruction, kind 10 data_processing): CMD is a program and its
arguments split on spaces (no shell), run as CMD INPUT_DIR OUTPUT_DIR (docs/capture-sets.md).
svc node --version prints the agent's version; it warns once when the server runs a newer one.

svc node doctor --server URL [--upstream BASE_URL] [--gguf CATALOG_ID=PATH]... [--api-key KEY] [--data-dir DIR]

Checks this machine as a node needs it, one line per check with the fix when one fails: Node.js
version, the server reachable and its version, clock skew against the server (signed calls are
refused past 60 s), podman rootless, container images, GPUs and CDI, the engine (--upstream
answers /models, --gguf: node-llama-cpp loads). Exit 0 when every required check passes, 1 when
one fails, 2 on bad usage.`;

export const VERIFY_DOWNLOAD_USAGE = `svc verify-download FILE.tgz (--server URL | --sha256 HEX --signature HEX --public-key HEX)

Checks a downloaded svc tarball before you install it: its SHA-256 and the Ed25519 signature
the platform key made over its exact bytes. --server reads both, and the platform's public keys,
from URL (GET /api/v1/downloads and /api/v1/keys/platform); or give the three values yourself.
Exit 0 when both match, 1 when one does not, 2 on bad usage or an unreadable file.`;

export const VERIFY_USAGE = `svc verify BUNDLE.json [--public-key HEX ...] [--trust-file KEYS.json] [--log-key VKEY ...]
           [--require-log] [--json] [--max-bytes N]

Verifies an evidence bundle (svc.evidence_bundle.v1) offline: strict parsing, the bundle hash,
every event hash (edges included), the Merkle root, the platform's certificate and its signer,
every receipt's SVC1 signature, that each receipt is bound to the graph, and the run's entry in
the transparency log (log_leaf, log_leaf_hash, log_checkpoint_signature, log_inclusion). Prints
one line per check; --json prints {ok, checks} instead. Exit 0 only if every check passes, 1 if
one fails, 2 on bad usage or an unreadable file. '-' reads the bundle from standard input.
A bundle made before the log has no entry (ABSENT) and one whose run is not yet in a checkpoint
is PENDING: neither is a pass, and neither fails unless --require-log is given.

Pin the platform keys you trust, or the bundle's own key list is trusted (and the output says so):
  --public-key HEX     a 64-hex-character Ed25519 key (repeatable); also trusted for the log's
                       checkpoint
  --trust-file FILE    the JSON of GET /api/v1/keys/platform ({"keys": [...], "log": {...}}) or an
                       array of keys; validity windows (valid_from, valid_until) are enforced
  --log-key VKEY       a note verifier key (<origin>+<hash>+<base64>) trusted for the checkpoint`;

export const LOG_USAGE = `svc log watch --state DIR URL [--once] [--interval SECONDS] [--log-key VKEY ...]

Monitors a deployment's transparency log. Each check fetches URL's signed checkpoint, verifies its
signature (--log-key, else the log keys the server listed the first time, kept in DIR), proves it
consistent with the last checkpoint kept in DIR (the server's consistency proof, and the new
leaves' hashes read from the hash tiles recomputed into the signed root) and keeps it. Two signed
checkpoints that contradict each other (same size and another root, or no proof that the new one
extends the kept one) are printed and written to DIR/fork-<time>.txt, the evidence of a fork; a
smaller tree than the kept one is a rollback (DIR/rollback-<time>.txt); a leaf hash the signed
tree does not hold is named by its index. Fetches only URL (http or https, no redirects).
  --once               check once and exit (for cron): 0 consistent, 1 fork, rollback or bad
                       leaf, 2 server unreachable (a warning; the kept checkpoint stays)
  --interval SECONDS   between checks when polling (default 60); stops cleanly on SIGINT/SIGTERM`;

export const ATTEST_USAGE = `svc attest verify --sev-snp REPORT --vcek CERT [--chain PEM] [--at DATE] [--json]
svc attest verify --tdx QUOTE --collateral DIR [--at DATE] [--require-tcb STATUS[,STATUS]] [--json]

Verifies confidential-computing evidence offline against the vendors' pinned roots (AMD ARK
Milan/Genoa, Intel SGX Root CA). Prints one line per check; exit 0 only if every check passes,
1 if one fails, 2 on bad usage or an unreadable file. --at judges every date (certificates, CRLs,
collateral) at DATE instead of now.
  --sev-snp REPORT   a 1184-byte SNP attestation report; --vcek its chip's VCEK (DER or PEM);
                     --chain the ASK and ARK (PEM), by default AMD's embedded chain
  --tdx QUOTE        a TDX quote (v4 or v5) with its PCK chain inside; --collateral DIR holds
                     tcb_info.json, qe_identity.json (the PCS response bodies), tcb_signing_chain.pem
                     (the TCB-Info-Issuer-Chain header), pck_crl.der and root_crl.der
                     (PCS/go-tdx-guest names also accepted: sample_tcbInfo_response,
                     sample_qeIdentity_response, pckcrl, rootcrl.der)
  --require-tcb      TDX statuses to accept (UpToDate, SWHardeningNeeded, ConfigurationNeeded,
                     OutOfDate, ...); the status is always printed, it fails only when excluded`;

export const KEYS_USAGE = `svc keys rotate [--data-dir DIR]

Retires the platform signing key (it stays published at GET /api/v1/keys/platform with its
valid_until, so every run and webhook it signed stays verifiable) and makes a new one active.
Servers on the same PostgreSQL (DATABASE_URL) switch to the new key at once; the embedded store
can be opened by one process only: stop \`svc serve\` first. When SVC_SIGNING_KEY is set, rotate
by changing it instead.`;

-- A top-up's credit is paid credit once the payment is confirmed: by the provider (Stripe) when it
-- completes, or, for the offline `local` provider, whose checkout page any buyer can submit, by an
-- administrator with `svc topups confirm` (docs/payouts.md). Until then a local top-up's credit is
-- promotional, like the free tier: spendable, never paid out. Top-ups paid before this migration
-- were credited as paid credit, so they count as confirmed when they completed.
ALTER TABLE topups ADD COLUMN confirmed_at timestamptz;
UPDATE topups SET confirmed_at = completed_at WHERE status = 'paid';

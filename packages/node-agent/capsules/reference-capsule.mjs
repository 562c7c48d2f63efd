#!/usr/bin/env node
// The reference capsule for work orders (docs/work-orders.md): asks the SVC gateway's chat
// completions (any OpenAI-compatible endpoint: OPENAI_BASE_URL, OPENAI_API_KEY) for a unified
// diff that reaches the order's goal, applies it with `git apply`, and names the check commands
// the agent then runs: for each required check, the first detected command that contains it.
//   svc node ... --capsule node --capsule-arg packages/node-agent/capsules/reference-capsule.mjs
// with SVC_CAPSULE_OPENAI_BASE_URL=https://svc.example/v1 SVC_CAPSULE_OPENAI_API_KEY=svc_live_...
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';

const MAX_FILES = 40;
const MAX_FILE_BYTES = 8 * 1024;

const order = JSON.parse(readFileSync(process.env.SVC_WORK_ORDER ?? '', 'utf8'));
const resultPath = process.env.SVC_CAPSULE_RESULT ?? '';
const git = (args) => execFileSync('git', args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });

/** The repository as the model sees it: every path, and the text of the small files. */
function context() {
  const paths = git(['ls-files']).split('\n').filter(Boolean);
  const shown = [];
  for (const path of paths) {
    if (shown.length >= MAX_FILES) break;
    try {
      if (statSync(path).size <= MAX_FILE_BYTES) shown.push(`--- ${path}\n${readFileSync(path, 'utf8')}`);
    } catch {
      // Not a regular file (a submodule, a broken link): listed, not shown.
    }
  }
  return `Files:\n${paths.join('\n')}\n\nContents:\n${shown.join('\n')}`;
}

/** The first fenced block (```diff ... ```), or the answer itself when it is a bare diff. */
export function extractDiff(answer) {
  const fenced = /```(?:diff|patch)?\s*\n([\s\S]*?)```/.exec(answer);
  const text = (fenced ? fenced[1] : answer).trim();
  return text.endsWith('\n') ? text : `${text}\n`;
}

const rules = [
  `You may change only paths matching: ${order.allowed_paths.join(', ') || '(none: your change will be reviewed by a person)'}.`,
  `Never change paths matching: ${order.forbidden_paths.join(', ') || '(none)'}.`,
  `These checks must pass afterwards: ${order.required_checks.join(', ') || '(none)'}.`,
].join('\n');
const client = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY ?? '' });
const completion = await client.chat.completions.create({
  model: order.model ?? 'phi-4',
  temperature: 0,
  messages: [
    {
      role: 'system',
      content:
        'You change a git repository. Answer with one unified diff (git format, paths prefixed a/ and b/) in a ```diff block, nothing else.',
    },
    {
      role: 'user',
      content: `Goal: ${order.goal}\n${order.architecture_plan ? `Plan: ${order.architecture_plan}\n` : ''}${rules}\n\n${context()}`,
    },
  ],
});
const diff = extractDiff(completion.choices[0]?.message?.content ?? '');
const patch = join(process.env.TMPDIR ?? '/tmp', 'capsule.patch');
writeFileSync(patch, diff);
git(['apply', '--whitespace=nowarn', patch]);

const commands = order.tooling?.test_commands ?? [];
const checks = order.required_checks.flatMap((check) => {
  const command = commands.find((c) => c.includes(check));
  return command ? [command.split(/\s+/)] : [];
});
writeFileSync(
  resultPath,
  JSON.stringify({ summary: `applied a ${diff.split('\n').length}-line diff from ${order.model ?? 'phi-4'}`, checks }),
);

// Loaded into `svc serve` and `svc node` by bench/hops.ts (`node --import`): records when this
// process passed each point of a request's way (the `svc:hop` diagnostics channel of
// @svc/protocol's `hop`, Node's HTTP server and undici's requests), on one clock shared by every
// process of the machine, and writes them to `$SVC_HOPS_DIR/<role>-<pid>.json` as it exits.
import dc from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';

const dir = process.env.SVC_HOPS_DIR;
const role = process.argv[2] === 'serve' ? 'gateway' : 'node';
const marks = [];
const mark = (label) => marks.push(label, performance.timeOrigin + performance.now());
if (dir) {
  dc.subscribe('svc:hop', (label) => mark(label));
  dc.subscribe('http.server.request.start', () => mark('http.in'));
  dc.subscribe('http.server.response.finish', () => mark('http.out'));
  dc.subscribe('undici:request:create', () => mark('upstream.create'));
  dc.subscribe('undici:request:headers', () => mark('upstream.headers'));
  dc.subscribe('undici:request:trailers', () => mark('upstream.end'));
  process.on('exit', () => writeFileSync(`${dir}/${role}-${process.pid}.json`, JSON.stringify(marks)));
}

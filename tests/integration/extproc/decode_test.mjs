// kvroute's ext_proc messages against the official @grpc/proto-loader (the loader @grpc/grpc-js
// uses), in both directions, through the serializers of the method
// /envoy.service.ext_proc.v3.ExternalProcessor/Process:
//   1. the picker's responses, serialized by libprotobuf (kvroute_extproc_wire encode), are
//      deserialized by proto-loader and every field the EPP protocol requires is checked;
//   2. the gateway's requests, serialized by proto-loader, are parsed by kvroute
//      (kvroute_extproc_wire decode) and what the picker reads is checked.
// Both sides use kvroute's own .proto (src/extproc/proto), so a wrong field number there
// would pass 1 and 2; step 3 therefore walks the raw bytes with a decoder written here and
// pins the field numbers of Envoy's public API (envoy/service/ext_proc/v3/external_processor.proto
// and its imports) as literal numbers.
// No Envoy binary runs here; an Envoy-based end-to-end test needs `serve --epp` (not built).
//
// usage: node decode_test.mjs KVROUTE_EXTPROC_WIRE SOURCE_DIR
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const [tool, src] = process.argv.slice(2);
const require = createRequire(path.join(src, 'package.json'));
const protoLoader = require('@grpc/proto-loader');

const protoDir = path.join(src, 'src/extproc/proto');
const def = protoLoader.loadSync('envoy/service/ext_proc/v3/external_processor.proto', {
  includeDirs: [protoDir], keepCase: true, longs: String, enums: String, defaults: false, oneofs: true,
});
const method = def['envoy.service.ext_proc.v3.ExternalProcessor'].Process;

let failures = 0;
function check(name, cond, detail = '') {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${name}${cond ? '' : ' ' + detail}`);
  if (!cond) failures++;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvroute-extproc-'));
try {
  check('method path', method.path === '/envoy.service.ext_proc.v3.ExternalProcessor/Process', method.path);
  check('bidirectional stream', method.requestStream && method.responseStream);

  // 1. Picker → gateway.
  const names = execFileSync(tool, ['encode', dir], { encoding: 'utf8' }).trim().split('\n');
  const read = (n) => method.responseDeserialize(fs.readFileSync(path.join(dir, n)));

  const dest = read('destination.bin');
  check('destination: request_headers oneof', dest.response === 'request_headers', dest.response);
  const common = dest.request_headers.response;
  check('destination: clear_route_cache', common.clear_route_cache === true);
  const set = common.header_mutation.set_headers;
  const hdr = Object.fromEntries(set.map((o) => [o.header.key, Buffer.from(o.header.raw_value).toString()]));
  const list = '10.0.0.1:8000,10.0.0.2:8000';
  check('destination: header x-gateway-destination-endpoint = ordered list', hdr['x-gateway-destination-endpoint'] === list,
        JSON.stringify(hdr));
  check('destination: content-length set', hdr['content-length'] === '150000', JSON.stringify(hdr));
  check('destination: append_action OVERWRITE_IF_EXISTS_OR_ADD',
        set.every((o) => o.append_action === 'OVERWRITE_IF_EXISTS_OR_ADD'));
  const lb = dest.dynamic_metadata.fields['envoy.lb'].structValue.fields;
  check('destination: envoy.lb metadata equals the header', lb['x-gateway-destination-endpoint'].stringValue === list,
        JSON.stringify(lb));

  const chunks = names.filter((n) => n.startsWith('request_body_')).sort().map(read);
  check('body: three chunks for 150000 bytes', chunks.length === 3, String(chunks.length));
  let total = 0;
  chunks.forEach((c, i) => {
    const s = c.request_body.response.body_mutation.streamed_response;
    check(`body chunk ${i}: streamed_response <= 62000 bytes`, c.body_mutation === undefined &&
          c.request_body.response.body_mutation.mutation === 'streamed_response' && s.body.length <= 62000);
    check(`body chunk ${i}: end_of_stream only on the last`, Boolean(s.end_of_stream) === (i === chunks.length - 1));
    total += s.body.length;
  });
  check('body: all bytes', total === 150000, String(total));
  const rb = read('response_body_0.bin');
  check('response body: response_body oneof, SSE bytes echoed', rb.response === 'response_body' &&
        Buffer.from(rb.response_body.response.body_mutation.streamed_response.body).toString() === 'data: {}\n\n');

  for (const [file, code, body] of [['immediate_503.bin', 'ServiceUnavailable', 'no ready endpoint'],
                                    ['immediate_429.bin', 'TooManyRequests', 'request evicted by flow control']]) {
    const r = read(file);
    check(`${file}: immediate_response ${code}`, r.response === 'immediate_response' &&
          r.immediate_response.status.code === code && Buffer.from(r.immediate_response.body).toString() === body,
          JSON.stringify(r));
  }

  // 2. Gateway → picker.
  const kv = (k, v) => ({ key: k, raw_value: Buffer.from(v) });
  const requests = {
    'headers.bin': {
      request_headers: { headers: { headers: [kv(':method', 'POST'), kv(':path', '/v1/chat/completions'),
                                              kv('content-type', 'application/json')] }, end_of_stream: false },
      metadata_context: { filter_metadata: { 'envoy.lb.subset_hint': { fields: {
        'x-gateway-destination-endpoint-subset': { listValue: { values: [{ stringValue: '10.0.0.1:8000' },
                                                                         { stringValue: '10.0.0.2:8000' }] } } } } } },
      protocol_config: { request_body_mode: 'FULL_DUPLEX_STREAMED', response_body_mode: 'FULL_DUPLEX_STREAMED' },
    },
    'body.bin': { request_body: { body: Buffer.from('{"model":"m","messages":[]}'), end_of_stream: true } },
    'served.bin': {
      response_headers: { headers: { headers: [kv(':status', '200'), kv('content-type', 'text/event-stream')] } },
      metadata_context: { filter_metadata: { 'envoy.lb': { fields: {
        'x-gateway-destination-endpoint-served': { stringValue: '10.0.0.2:8000' } } } } },
    },
  };
  const seen = {};
  for (const [file, msg] of Object.entries(requests)) {
    fs.writeFileSync(path.join(dir, file), method.requestSerialize(msg));
    seen[file] = execFileSync(tool, ['decode', path.join(dir, file)], { encoding: 'utf8' }).trim().split('\n');
  }
  const has = (file, line) => check(`${file}: kvroute reads "${line}"`, seen[file].includes(line), seen[file].join(' | '));
  has('headers.bin', 'kind request_headers');
  has('headers.bin', 'header :path=/v1/chat/completions');
  has('headers.bin', 'end_of_stream 0');
  has('headers.bin', 'subset 10.0.0.1:8000 10.0.0.2:8000');
  has('headers.bin', 'request_body_mode 4');
  has('body.bin', 'kind request_body');
  has('body.bin', 'body_bytes 27');
  has('body.bin', 'end_of_stream 1');
  has('served.bin', 'kind response_headers');
  has('served.bin', 'header content-type=text/event-stream');
  has('served.bin', 'served 10.0.0.2:8000');

  // 3. Field numbers pinned independently of the .proto: a protobuf wire walker.
  function fields(buf) {
    const out = [];
    let i = 0;
    const varint = () => { let v = 0n, s = 0n, b; do { b = buf[i++]; v |= BigInt(b & 0x7f) << s; s += 7n; } while (b & 0x80); return v; };
    while (i < buf.length) {
      const tag = Number(varint()), no = tag >> 3, wt = tag & 7;
      if (wt === 0) out.push({ no, v: varint() });
      else if (wt === 2) { const n = Number(varint()); out.push({ no, b: buf.subarray(i, i + n) }); i += n; }
      else throw new Error(`wire type ${wt}`);
    }
    return out;
  }
  const one = (buf, no) => fields(buf).find((f) => f.no === no);
  const destBytes = fs.readFileSync(path.join(dir, 'destination.bin'));
  // ProcessingResponse.request_headers = 1, .dynamic_metadata = 8
  check('wire: ProcessingResponse.request_headers is field 1', one(destBytes, 1) !== undefined);
  check('wire: ProcessingResponse.dynamic_metadata is field 8', one(destBytes, 8) !== undefined);
  // HeadersResponse.response = 1 → CommonResponse.header_mutation = 2, clear_route_cache = 5
  const cr = one(one(destBytes, 1).b, 1).b;
  check('wire: CommonResponse.clear_route_cache is field 5', one(cr, 5)?.v === 1n);
  // HeaderMutation.set_headers = 1 → HeaderValueOption.header = 1 (HeaderValue key = 1,
  // raw_value = 3), append_action = 3
  const hvo = one(one(cr, 2).b, 1).b;
  const hv = one(hvo, 1).b;
  check('wire: HeaderValue.key is 1, raw_value is 3',
        Buffer.from(one(hv, 1).b).toString() === 'x-gateway-destination-endpoint' &&
        Buffer.from(one(hv, 3).b).toString() === list);
  check('wire: HeaderValueOption.append_action is 3 (OVERWRITE_IF_EXISTS_OR_ADD = 2)', one(hvo, 3)?.v === 2n);
  // ProcessingResponse.request_body = 3 → BodyResponse.response = 1 → CommonResponse.body_mutation = 3
  // → BodyMutation.streamed_response = 3 → StreamedBodyResponse.body = 1, end_of_stream = 2
  const last = fs.readFileSync(path.join(dir, 'request_body_2.bin'));
  const sbr = one(one(one(one(last, 3).b, 1).b, 3).b, 3).b;
  check('wire: StreamedBodyResponse.body is 1, end_of_stream is 2', one(sbr, 1).b.length === 150000 - 2 * 62000 && one(sbr, 2)?.v === 1n);
  // ProcessingResponse.response_body = 4; .immediate_response = 7 → ImmediateResponse.status = 1
  // (HttpStatus.code = 1), body = 3, details = 5
  check('wire: ProcessingResponse.response_body is field 4', one(fs.readFileSync(path.join(dir, 'response_body_0.bin')), 4) !== undefined);
  const imm = one(fs.readFileSync(path.join(dir, 'immediate_503.bin')), 7).b;
  check('wire: ImmediateResponse.status.code is 1.1 = 503, body 3, details 5',
        one(one(imm, 1).b, 1)?.v === 503n && Buffer.from(one(imm, 3).b).toString() === 'no ready endpoint' &&
        Buffer.from(one(imm, 5).b).toString() === 'no_endpoint');
  // Gateway side: ProcessingRequest.request_headers = 2, metadata_context = 8 (Metadata.filter_metadata = 1),
  // protocol_config = 11; HttpHeaders.headers = 1, end_of_stream = 3; request_body = 4; response_headers = 3
  const hb = fs.readFileSync(path.join(dir, 'headers.bin'));
  check('wire: ProcessingRequest.request_headers 2, metadata_context 8, protocol_config 11',
        one(hb, 2) && one(one(hb, 8).b, 1) && one(hb, 11) ? true : false);
  check('wire: ProcessingRequest.request_body is 4, response_headers is 3',
        one(fs.readFileSync(path.join(dir, 'body.bin')), 4) !== undefined &&
        one(fs.readFileSync(path.join(dir, 'served.bin')), 3) !== undefined);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
console.log(`${failures} failures`);
process.exit(failures ? 1 : 0);

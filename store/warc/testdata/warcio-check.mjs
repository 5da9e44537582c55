// Reads WARC files with the warcio npm package (an independent WARC
// implementation, https://github.com/webrecorder/warcio.js) and prints, as
// one JSON document, what it found in them: every record's WARC fields, the
// SHA-1 digests of its block and payload computed here from the bytes
// warcio hands out, the HTTP message warcio parsed (with the body decoded
// per its Content-Encoding), and warcio's own CDX index of each file.
// The Go test store/warc/warcio_test.go runs it and checks the results.
//
// usage: node warcio-check.mjs <dir holding node_modules/warcio> <file.warc.gz>...

import fs from "node:fs";
import path from "node:path";
import crypto from "node:crypto";
import { createRequire } from "node:module";

const [prefix, ...files] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(prefix), "package.json"));
const { WARCParser, CDXIndexer } = require("warcio");
const warcioVersion = JSON.parse(
  fs.readFileSync(path.join(path.resolve(prefix), "node_modules", "warcio", "package.json"), "utf8"),
).version;

// RFC 4648 base 32, written here rather than taken from warcio or Go.
function base32(buf) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = 0, value = 0, out = "";
  for (const byte of buf) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  while (out.length % 8) out += "=";
  return out;
}

const sha1 = (bytes) => "sha1:" + base32(crypto.createHash("sha1").update(bytes).digest());
const b64 = (bytes) => Buffer.from(bytes).toString("base64");

// Pass 1: raw blocks, to check the block digests and lengths.
async function rawPass(file) {
  const parser = new WARCParser(fs.createReadStream(file), { parseHttp: false, keepHeadersCase: true });
  const out = [];
  for await (const record of parser) {
    const offset = parser.offset;
    const block = await record.readFully(false);
    const h = (name) => record.warcHeader(name) ?? null;
    out.push({
      offset,
      type: record.warcType,
      id: h("WARC-Record-ID"),
      targetURI: record.warcTargetURI ?? null,
      date: record.warcDate ?? null,
      contentType: record.warcContentType ?? null,
      contentLength: record.warcContentLength,
      blockLength: block.length,
      blockDigest: record.warcBlockDigest ?? null,
      computedBlockDigest: sha1(block),
      payloadDigest: record.warcPayloadDigest ?? null,
      concurrentTo: h("WARC-Concurrent-To"),
      refersTo: h("WARC-Refers-To"),
      ipAddress: h("WARC-IP-Address"),
      truncated: h("WARC-Truncated"),
      filename: h("WARC-Filename"),
      title: h("WARC-Title"),
      simhash: h("WARC-Simhash"),
      block: b64(block),
    });
  }
  return out;
}

// Pass 2: HTTP messages as warcio parses them.
async function httpPass(file) {
  const parser = new WARCParser(fs.createReadStream(file));
  const out = [];
  for await (const record of parser) {
    const entry = { type: record.warcType };
    if (record.httpHeaders) {
      const hh = record.httpHeaders;
      const raw = await record.readFully(false);
      let decoded = null, decodeError = null;
      try {
        decoded = b64(await record.readFully(true));
      } catch (e) {
        decodeError = String(e);
      }
      entry.http = {
        statusline: hh.statusline,
        status: hh.statusCode ?? null,
        method: hh.method ?? null,
        requestPath: record.warcType === "request" ? hh.requestPath : null,
        headers: Object.fromEntries(hh.headers.entries()),
        payloadLength: raw.length,
        computedPayloadDigest: sha1(raw),
        payload: b64(raw),
        decoded,
        decodeError,
      };
    } else if (record.warcType === "conversion") {
      entry.text = await record.contentText();
    } else {
      await record.skipFully();
    }
    out.push(entry);
  }
  return out;
}

// Pass 3: warcio's CDX indexer, as used to build replay indexes.
async function cdxPass(file) {
  const indexer = new CDXIndexer({ format: "json" });
  const out = [];
  for await (const cdx of indexer.iterIndex([{ filename: path.basename(file), reader: fs.createReadStream(file) }])) {
    out.push(cdx);
  }
  return out;
}

const result = { warcio: warcioVersion, files: [] };
for (const file of files) {
  const raw = await rawPass(file);
  const http = await httpPass(file);
  if (raw.length !== http.length) {
    throw new Error(`${file}: ${raw.length} records in one pass, ${http.length} in the other`);
  }
  result.files.push({
    file: path.basename(file),
    records: raw.map((r, i) => ({ ...r, http: http[i].http ?? null, text: http[i].text ?? null })),
    cdx: await cdxPass(file),
  });
}
process.stdout.write(JSON.stringify(result, null, 1) + "\n");

#!/usr/bin/env node
// One call through pinproxy with Node's built-in https module (no packages).
//
// Trust step: an unmodified app adds pinproxy's CA with NODE_EXTRA_CA_CERTS,
// read once at start-up and added to Node's bundled roots (the system store
// is not used):
//   NODE_EXTRA_CA_CERTS=state/ca.pem node app.js
// That variable holds one file, and is often set already (a corporate CA);
// then it has to name a bundle holding both. This script does not depend on
// it: it passes Node's bundled roots plus $PINPROXY_CA to the TLS connection
// itself, so it works whatever NODE_EXTRA_CA_CERTS says.
//
// Proxy step: Node's https module ignores HTTPS_PROXY unless the runtime is
// told to honour it (NODE_USE_ENV_PROXY=1 on the Node releases that have it);
// this script opens the CONNECT tunnel itself, which works on every release.
'use strict';
const http = require('node:http');
const https = require('node:https');
const tls = require('node:tls');
const fs = require('node:fs');

const PINPROXY = process.env.PINPROXY || 'http://127.0.0.1:8080';
const PINPROXY_CA = process.env.PINPROXY_CA || 'state/ca.pem';
const API_URL = process.env.API_URL || 'https://api.spotify.com/v1/markets';

// Giving `ca` replaces Node's defaults, so the bundled roots are kept explicitly.
const ca = [...tls.rootCertificates, fs.readFileSync(PINPROXY_CA, 'utf8')];

const proxy = new URL(PINPROXY);
const target = new URL(API_URL);
const port = target.port || '443';

const connect = http.request({
  host: proxy.hostname,
  port: proxy.port || 80,
  method: 'CONNECT',
  path: `${target.hostname}:${port}`,
  headers: {
    Host: `${target.hostname}:${port}`,
    // PINPROXY=http://NAME:PASSWORD@host:port: the identity pinproxy admits
    // (docs/policies.md, "Who may go where"), sent on the CONNECT.
    ...(proxy.username ? { 'Proxy-Authorization': 'Basic ' + Buffer.from(
      `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64') } : {}),
  },
});
connect.on('connect', (res, socket) => {
  if (res.statusCode !== 200) {
    // Refused at CONNECT (client not allowed, host denied): the reason is in the header.
    console.error(`HTTP ${res.statusCode} (pinproxy: ${res.headers['x-pinproxy-error'] || 'refused'})`);
    process.exit(1);
  }
  const request = https.request(API_URL, {
    // TLS inside the tunnel, verified against Node's roots plus pinproxy's CA.
    createConnection: () => tls.connect({ socket, servername: target.hostname, ca }),
    // Without an agent Node would assume port 80 and send `Host: name:80`;
    // pinproxy answers 421 to a Host that is not the CONNECT host and port.
    defaultPort: 443,
  }, (response) => {
    let body = '';
    response.setEncoding('utf8');
    response.on('data', (chunk) => { body += chunk; });
    response.on('end', () => {
      console.log(body);
      const reason = response.headers['x-pinproxy-error'];
      console.error(`HTTP ${response.statusCode}` + (reason ? ` (pinproxy: ${reason})` : ''));
      socket.destroy();
    });
  });
  request.on('error', (error) => { console.error(error.message); process.exit(1); });
  request.end();
});
connect.on('error', (error) => { console.error(error.message); process.exit(1); });
connect.end();

// The upstream of the Fastify peer (bench/peers/fastify.mjs): a node:http handler process answering
// GET /bench/hello with {"ok":true} and echoing POST /bench/echo. Prints "port=<n>".
import { createServer } from 'node:http';

const server = createServer((req, res) => {
  if (req.method === 'POST') {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(Buffer.concat(chunks));
    });
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end('{"ok":true}');
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(`port=${server.address().port}`));

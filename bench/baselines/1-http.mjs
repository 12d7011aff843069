// Baseline (1): a raw node:http hello world, one process. Prints "port=<n>".
import { createServer } from 'node:http';

const body = '{"ok":true}';
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  });
});
server.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) }, () => console.log(`port=${server.address().port}`));

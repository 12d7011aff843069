// Baseline (7), stream fan-out: the least a server must do to fan a change out to its subscribers.
// One `ws` WebSocketServer; clients on `/` subscribe by sending any text frame (answered with one
// frame, like a sync); each text frame from the publisher on `/publish` is wrapped once in a change
// message of iii's shape and sent to every subscriber. One process, no store, no validation, no
// bounds. Prints "port=<n>" once listening. No Switchyard code.
import { WebSocketServer } from 'ws';

const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
const subscribers = new Set();

wss.on('connection', (ws, req) => {
  if (req.url === '/publish') {
    ws.on('message', (data) => {
      const text = JSON.stringify({
        type: 'stream',
        timestamp: Date.now(),
        streamName: 'bench',
        groupId: 'room',
        id: null,
        event: { type: 'event', event: { type: 'tick', data: JSON.parse(data.toString()) } },
      });
      for (const subscriber of subscribers) subscriber.send(text);
    });
    return;
  }
  ws.once('message', () => {
    subscribers.add(ws);
    ws.send(JSON.stringify({ type: 'stream', event: { type: 'sync', data: [] } }));
  });
  ws.on('close', () => subscribers.delete(ws));
});
await new Promise((resolve) => wss.once('listening', resolve));
process.stdout.write(`port=${wss.address().port}\n`);
process.on('SIGTERM', () => process.exit(0));

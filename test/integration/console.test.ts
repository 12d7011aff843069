// The admin console (GET / on the admin listener) in a real headless Chromium (Debian's `chromium`,
// driven by playwright-core, which downloads no browser): it lists the nodes, processes, workers and
// routes of a two-node Redis-mode cluster, updates its rates by itself, and a screenshot of its route
// table shows rows that were not there before the worker came (pixels counted in the browser).
import { spawnSync } from 'node:child_process';
import type { Browser, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { startEngine, startWorker, stopAll, WORKER_READY_MS } from '../support/processes.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

function chromiumBinary(): string {
  const found = spawnSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).stdout.trim().split('\n')[0] ?? '';
  if (found === '') throw new Error('chromium is not installed: run scripts/prerequisites.sh (README, Quick start)');
  return found;
}

/**
 * Dark pixels (text, borders) in a PNG, counted by drawing it on a canvas in a blank page of the same
 * browser (the console's own policy allows no data: images). Passed as source: the page has the DOM.
 */
async function darkPixels(blank: Page, png: Buffer): Promise<{ width: number; height: number; dark: number }> {
  return blank.evaluate(`(async () => {
    const image = new Image();
    image.src = 'data:image/png;base64,${png.toString('base64')}';
    await image.decode();
    const canvas = document.createElement('canvas');
    canvas.width = image.width;
    canvas.height = image.height;
    const context = canvas.getContext('2d');
    context.drawImage(image, 0, 0);
    const data = context.getImageData(0, 0, image.width, image.height).data;
    let dark = 0;
    for (let i = 0; i < data.length; i += 4) if (data[i] + data[i + 1] + data[i + 2] < 300) dark++;
    return { width: image.width, height: image.height, dark };
  })()`);
}

describe('the admin console in headless Chromium, on a two-node cluster', () => {
  let redis: RedisServer;
  let nodeA: EngineHandle;
  let nodeB: EngineHandle;
  let worker: WorkerHandle | undefined;
  let browser: Browser;
  let page: Page;
  let blank: Page;

  beforeAll(async () => {
    redis = await startRedisServer();
    const cluster = { processes: 1, redis_url: redis.url, secret: 'console-secret', name: `c${Math.random().toString(36).slice(2, 8)}`, advertise_host: '127.0.0.1', heartbeat_ms: 200, lease_ms: 1000 };
    nodeA = await startEngine({ cluster: { ...cluster, node_id: 'node-a' }, logLevel: 'warn' });
    nodeB = await startEngine({ cluster: { ...cluster, node_id: 'node-b' }, logLevel: 'warn' });
    browser = await chromium.launch({ executablePath: chromiumBinary(), headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    blank = await browser.newPage();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await stopAll(worker, nodeB, nodeA);
    await redis?.stop();
  });

  it('is served on GET / with its script, under a strict content security policy', async () => {
    const res = await http(`${nodeA.adminUrl}/`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['content-security-policy']).toContain("script-src 'self'");
    expect((await http(`${nodeA.adminUrl}/console.js`)).status).toBe(200);
  });

  it('shows the routes, owners, workers and nodes of the cluster, and updates the rates by itself', async () => {
    await page.goto(`${nodeA.adminUrl}/`);
    await page.waitForSelector('#routes tbody tr.empty', { timeout: 20_000 });
    const emptyShot = await darkPixels(blank, await page.locator('#routes').screenshot());

    // The worker connects to node B; node A's console must show its routes, owned by node B's process.
    worker = startWorker('http-worker', nodeB.workerUrl);
    await waitForStatus(`${nodeA.httpUrl}/echo/0`, (s) => s === 200, {}, WORKER_READY_MS);
    await page.locator('#routes tbody tr', { hasText: '/echo/:id' }).first().waitFor({ timeout: 20_000 });
    const echoRow = page.locator('#routes tbody tr', { hasText: 'api::echo' }).filter({ hasText: '/echo/:id' });
    await expect.poll(async () => echoRow.count()).toBe(1);
    expect(await echoRow.locator('td').nth(0).textContent()).toBe('GET');
    expect(await echoRow.locator('td').nth(3).textContent()).toMatch(/^node-b\//);

    // The worker's name comes in its own message after its registrations (iii-sdk sends its metadata
    // once connected), so the table may list it as "(unnamed)" for a refresh or two: wait for it.
    const workersText = async (): Promise<string> => (await page.locator('#workers tbody').textContent()) ?? '';
    await expect.poll(workersText, { timeout: 10_000 }).toContain('http-worker');
    expect(await workersText()).toContain('node-b');
    const nodesText = (await page.locator('#nodes tbody').textContent()) ?? '';
    expect(nodesText).toContain('node-a');
    expect(nodesText).toContain('node-b');

    // Requests through node A (and 500s from /throws): the rates rise without a reload.
    const rates = async () => {
      for (let i = 0; i < 10; i++) await http(`${nodeA.httpUrl}/echo/${i}`);
      for (let i = 0; i < 3; i++) await http(`${nodeA.httpUrl}/throws`);
      const echo = Number(await echoRow.locator('td').nth(4).textContent());
      const errors = Number(await page.locator('#routes tbody tr', { hasText: '/throws' }).locator('td').nth(5).textContent());
      return echo > 0 && errors > 0;
    };
    await expect.poll(rates, { timeout: 30_000, interval: 500 }).toBe(true);

    // The screenshot: the route table now has rows of text it did not have before.
    const shot = await page.locator('#routes').screenshot();
    expect(shot.subarray(1, 4).toString('latin1')).toBe('PNG');
    const filled = await darkPixels(blank, shot);
    expect(filled.height).toBeGreaterThan(emptyShot.height + 10 * 20);
    expect(filled.dark).toBeGreaterThan(emptyShot.dark * 3);
  });
});

// Jupyter in a cluster's launcher, end to end: a real edtd with the local
// backend and Debian's Jupyter Notebook, Debian's chromium. The console's
// Open Jupyter opens it; a notebook cell reads the hostfile and one trains
// MNIST with edtrun for an epoch; a Jupyter terminal runs edtrun; another
// user's token is refused 403 on the notebook URL. The tests run in order.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before } from 'node:test';
import { Edtd, launchBrowser, outputDir, Steps, waitFor } from './harness.mjs';

const kSource = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const kTrain = path.join(kSource, 'examples/mnist/train_mnist.py');
const kBase = '/c/tthvd/jupyter/';

let edtd;
let browser;
let page;
let jupyter; // the Jupyter tab
let bobToken;

const steps = new Steps(async (name) => {
  if (jupyter) await screenshot(`failed-${name.slice(0, 20).replace(/\W+/g, '-')}`, jupyter).catch(() => {});
});
const step = steps.step;

async function screenshot(name, target) {
  await target.screenshot({ path: path.join(outputDir(), `jupyter-${name}.png`), fullPage: true });
}

// The Jupyter REST API from inside the Jupyter tab: its session cookie is
// the only credential it has.
async function inJupyter(method, route, body) {
  return jupyter.evaluate(
    async ({ method, url, body }) => {
      const res = await fetch(url, { method, headers: { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, text: await res.text() };
    },
    { method, url: `${kBase}${route}`, body },
  );
}

// Types `source` into the notebook's last cell, runs it, and returns the
// cell's output once the kernel has finished the cell (its prompt shows a
// number, not *) and every pattern in `expected` matches it. The end alone
// is not enough: a line can still be on its way to the page; a pattern alone
// is not either: the lines after it could be.
async function runCell(source, expected, timeoutMs) {
  // By index: Shift+Enter adds a cell below, which .last() would then name.
  const cell = jupyter.locator('.cell').nth((await jupyter.locator('.cell').count()) - 1);
  await cell.locator('.CodeMirror').click();
  await jupyter.keyboard.type(source);
  await jupyter.keyboard.press('Shift+Enter');
  let text = '';
  try {
    return await waitFor(`the output of ${source}`, async () => {
      const finished = /\[\d+\]/.test(await cell.locator('.input_prompt').innerText());
      text = await cell.locator('.output_area').allInnerTexts().then((t) => t.join('\n'));
      return finished && expected.every((p) => p.test(text)) ? text : null;
    }, { timeoutMs });
  } catch (e) {
    throw new Error(`${e.message}; the cell's output:\n${text}`);
  }
}

before(async () => {
  steps.failed = true; // until the setup is done
  edtd = await Edtd.start();
  assert.equal((await edtd.api('POST', '/volumes', { name: 'data' })).status, 201);
  const created = await edtd.api('POST', '/clusters', {
    name: 'tthvd', framework: 'horovod', containers: 2, mounts: [{ volume: 'data', path: '/root/data' }],
  });
  assert.equal(created.status, 201, JSON.stringify(created.json));
  const bob = await edtd.api('POST', '/users', { name: 'bob' });
  assert.equal(bob.status, 201, JSON.stringify(bob.json));
  bobToken = bob.json.token;
  await waitFor('tthvd Running', async () => (await edtd.api('GET', '/clusters/tthvd')).json?.status?.phase === 'Running', { timeoutMs: 60000 });
  browser = await launchBrowser();
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  steps.failed = false;
});

after(async () => {
  await browser?.close();
  await steps.end(edtd);
});

step("the cluster page's Open Jupyter opens Jupyter Notebook in a new tab, rooted at the volume", async () => {
  await page.goto(`${edtd.base}/#/signin`);
  await page.fill('#token', edtd.token);
  await page.press('#token', 'Enter');
  await page.waitForURL(/#\/clusters$/);
  await page.goto(`${edtd.base}/#/clusters/tthvd`);
  const [tab] = await Promise.all([page.context().waitForEvent('page'), page.click('#open-jupyter')]);
  jupyter = tab;
  await jupyter.waitForURL(new RegExp(`${kBase}tree`), { timeout: 120000 });
  await jupyter.waitForSelector('#notebook_list');
  assert.equal(await page.textContent('#jupyter-error'), '');
  // Its root is the volume's directory: a file put there through Jupyter is
  // in the volume, as the launcher sees it.
  assert.equal((await inJupyter('PUT', 'api/contents/hello.txt', { type: 'file', format: 'text', content: 'hi' })).status, 201);
  const job = await edtd.api('POST', '/clusters/tthvd/jobs', { command: 'cat /root/data/hello.txt' });
  assert.equal(job.status, 201, JSON.stringify(job.json));
  await waitFor('the job to end', async () => (await edtd.api('GET', `/jobs/${job.json.id}`)).json?.state === 'Succeeded');
  await screenshot('tree', jupyter);
});

step('a notebook cell reads /etc/mpi/hostfile and one trains MNIST with edtrun for an epoch', async () => {
  const made = await inJupyter('POST', 'api/contents', { type: 'notebook' });
  assert.equal(made.status, 201, made.text);
  const name = JSON.parse(made.text).name;
  await jupyter.goto(`${edtd.base}${kBase}notebooks/${encodeURIComponent(name)}`);
  await waitFor('the kernel to be idle', async () => (await jupyter.locator('#kernel_indicator_icon.kernel_idle_icon').count()) === 1, { timeoutMs: 60000 });
  const hosts = await runCell('!cat /etc/mpi/hostfile', [/tthvd-worker-0 slots=1/], 30000);
  assert.deepEqual(hosts.trim().split('\n').map((l) => l.trim()), ['tthvd-launcher slots=1', 'tthvd-worker-0 slots=1']);
  const trained = await runCell(
    `!edtrun -np 2 --hostfile /etc/mpi/hostfile python3 ${kTrain} --epochs 1 --data-dir /root/data/mnist`,
    [/epoch=1 rank=0 size=2 samples=5000/, /epoch=1 rank=1 size=2 samples=5000/], 240000);
  await screenshot('notebook', jupyter);
});

// Debian 12's Notebook 6.4.12 ships its terminal page's xterm.js as a
// CommonJS stub that no browser can load (the page never draws), so the
// browser drives the Jupyter terminal's own protocol instead: the terminal
// that New -> Terminal makes (POST api/terminals), and its WebSocket,
// opened by the Jupyter tab with its session cookie through edtd's proxy.
step('a Jupyter terminal is a shell in the launcher that runs edtrun', async () => {
  const made = await inJupyter('POST', 'api/terminals');
  assert.equal(made.status, 200, made.text);
  const name = JSON.parse(made.text).name;
  const output = await jupyter.evaluate(async ({ url }) => {
    const ws = new WebSocket(url);
    let text = '';
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no end marker in 60 s; the terminal printed:\n${text}`)), 60000);
      ws.onerror = () => reject(new Error('the WebSocket failed'));
      ws.onopen = () => ws.send(JSON.stringify(['stdin', 'hostname; edtrun -np 2 --hostfile /etc/mpi/hostfile hostname; echo "@@$((40+2))"\r']));
      ws.onmessage = (event) => {
        const [kind, data] = JSON.parse(event.data);
        if (kind === 'stdout') text += data;
        if (text.includes('@@42')) {
          clearTimeout(timer);
          ws.close();
          resolve(text);
        }
      };
    });
  }, { url: `${edtd.base.replace('http', 'ws')}${kBase}terminals/websocket/${name}` });
  assert.match(output, /root@tthvd-launcher/);
  assert.match(output, /\[1\]<stdout>: ?tthvd-worker-0/);
  assert.match(output, /\[0\]<stdout>: ?tthvd-launcher/);
});

step("another user's token gets 403 on the notebook URL; no credentials 401", async () => {
  const bob = await fetch(`${edtd.base}${kBase}tree`, { headers: { Authorization: `Bearer ${bobToken}` } });
  assert.equal(bob.status, 403);
  assert.match((await bob.json()).error.message, /bob has no cluster 'tthvd'/);
  const bobsPage = await fetch(`${edtd.base}${kBase}tree`, { headers: { Authorization: `Bearer ${bobToken}`, Accept: 'text/html' } });
  assert.equal(bobsPage.status, 403);
  assert.match(await bobsPage.text(), /<p id="message">user bob has no cluster/);
  assert.equal((await fetch(`${edtd.base}${kBase}tree`)).status, 401);
  // The owner's token passes.
  assert.equal((await fetch(`${edtd.base}${kBase}api/status`, { headers: { Authorization: `Bearer ${edtd.token}` } })).status, 200);
  // Not even the admin opens another user's notebook: its pages would run
  // in edtd's origin, beside the admin's token.
  const bobs = await fetch(`${edtd.base}/api/v1/clusters`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${bobToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'bobs', framework: 'horovod', containers: 2 }),
  });
  assert.equal(bobs.status, 201, await bobs.text());
  const admin = await fetch(`${edtd.base}/c/bobs/jupyter/tree`, { headers: { Authorization: `Bearer ${edtd.token}` } });
  assert.equal(admin.status, 403);
  assert.match((await admin.json()).error.message, /owner only/);
});

// Jupyter in a cluster's launcher, end to end: a real edtd with the local
// backend, run from the build tree, and JupyterLab from edt's venv (make
// deps), Debian's chromium. The console's Open Jupyter opens JupyterLab; a
// notebook cell reads the hostfile, imports torch and edt, and one trains
// MNIST with edtrun for an epoch; JupyterLab's Terminal draws and runs
// edtrun; the console's terminal and `edt ssh`, login shells, find edt's
// tools and say nothing of lastlog; another user's token is refused 403 on
// the notebook URL. The tests run in order.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before } from 'node:test';
import { Edtd, jupyterTerminal, launchBrowser, outputDir, setJupyterTerminalText, Steps, waitFor } from './harness.mjs';

const kSource = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const kTrain = path.join(kSource, 'examples/mnist/train_mnist.py');
const kBase = '/c/tthvd/jupyter/';
// The build tree edtd runs from (<build>/src/control/edtd), whose tools containers get.
const kBuild = path.resolve(path.dirname(process.env.EDTD ?? '.'), '../..');

let edtd;
let browser;
let page;
let jupyter; // the Jupyter tab
let bobToken;

// What the Jupyter tab's page said and which of its requests failed: a
// failed step prints them.
const pageLog = [];
const steps = new Steps(async (name) => {
  if (jupyter) await screenshot(`failed-${name.slice(0, 20).replace(/\W+/g, '-')}`, jupyter).catch(() => {});
  console.error(`the Jupyter tab's console and failed requests:\n${pageLog.slice(-40).join('\n')}`);
});

function watch(target) {
  target.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') pageLog.push(`${m.type()}: ${m.text()}`); });
  target.on('pageerror', (e) => pageLog.push(`page error: ${e.message}`));
  target.on('requestfailed', (r) => pageLog.push(`failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`));
  target.on('response', (r) => { if (r.status() >= 400) pageLog.push(`${r.status()}: ${r.request().method()} ${r.url()}`); });
}
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

// Puts `source` into the notebook's last cell, runs it, and returns the
// cell's output once the kernel has finished the cell (its prompt shows a
// number, not *) and every pattern in `expected` matches it. The end alone
// is not enough: a line can still be on its way to the page; a pattern alone
// is not either: the lines after it could be.
async function runCell(source, expected, timeoutMs) {
  // By index: Shift+Enter adds a cell below, which .last() would then name.
  const cells = jupyter.locator('.jp-Notebook .jp-Cell');
  const cell = cells.nth((await cells.count()) - 1);
  await cell.locator('.cm-content').click();
  // As a paste: typed keys would meet the editor's closing brackets.
  await jupyter.keyboard.insertText(source);
  await jupyter.keyboard.press('Shift+Enter');
  let text = '';
  try {
    return await waitFor(`the output of ${source}`, async () => {
      const finished = /\[\d+\]/.test(await cell.locator('.jp-InputPrompt').innerText());
      text = await cell.locator('.jp-OutputArea').allInnerTexts().then((t) => t.join('\n'));
      return finished && expected.every((p) => p.test(text)) ? text : null;
    }, { timeoutMs });
  } catch (e) {
    throw new Error(`${e.message}; the cell's output:\n${text}`);
  }
}

// Types `command` into a terminal whose screen `screen()` reads, and returns
// that screen once `done` matches it.
async function typeInTerminal(target, focus, screen, command, done, what) {
  await target.locator(focus).click();
  await target.keyboard.type(`${command}\n`);
  let text = '';
  try {
    return await waitFor(what, async () => {
      text = await screen();
      return done.test(text) ? text : null;
    }, { timeoutMs: 60000 });
  } catch (e) {
    throw new Error(`${e.message}; the terminal shows:\n${text}`);
  }
}

// edt (the CLI) with edtd's API and the admin's token; `input` is written
// to it, on a terminal of its own (script(1)), as a user types.
function edtOnTerminal(args, input) {
  const command = [process.env.EDT, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ');
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    env: { ...process.env, EDT_API: edtd.base, EDT_TOKEN: edtd.token, TERM: 'xterm' },
  });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  child.stdin.write(input);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`edt ${args.join(' ')} did not end in 60 s:\n${out}`)); }, 60000);
    child.on('exit', (code) => { clearTimeout(timer); resolve({ code, out }); });
  });
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

step("the cluster page's Open Jupyter opens JupyterLab in a new tab, rooted at the volume, with no Clusters tab", async () => {
  await page.goto(`${edtd.base}/#/signin`);
  await page.fill('#token', edtd.token);
  await page.press('#token', 'Enter');
  await page.waitForURL(/#\/clusters$/);
  await page.goto(`${edtd.base}/#/clusters/tthvd`);
  const [tab] = await Promise.all([page.context().waitForEvent('page'), page.click('#open-jupyter')]);
  jupyter = tab;
  watch(jupyter);
  await jupyter.waitForURL(new RegExp(`${kBase}lab`), { timeout: 120000 });
  // The launcher, with a Terminal among what it starts.
  await jupyter.locator('.jp-LauncherCard', { hasText: 'Terminal' }).first().waitFor({ timeout: 60000 });
  assert.equal(await page.textContent('#jupyter-error'), '');
  // IPython parallel's Clusters tab (Notebook 6's) is not there to be taken
  // for edt's clusters.
  assert.equal(await jupyter.getByText('Clusters', { exact: true }).count(), 0);
  // Its root is the volume's directory: a file put there through Jupyter is
  // in the volume, as the launcher sees it.
  assert.equal((await inJupyter('PUT', 'api/contents/hello.txt', { type: 'file', format: 'text', content: 'hi' })).status, 201);
  const job = await edtd.api('POST', '/clusters/tthvd/jobs', { command: 'cat /root/data/hello.txt' });
  assert.equal(job.status, 201, JSON.stringify(job.json));
  await waitFor('the job to end', async () => (await edtd.api('GET', `/jobs/${job.json.id}`)).json?.state === 'Succeeded');
  await screenshot('lab', jupyter);
});

step('a notebook cell reads /etc/mpi/hostfile, imports torch and edt, and one trains MNIST with edtrun', async () => {
  const notebook = {
    type: 'notebook',
    content: {
      nbformat: 4, nbformat_minor: 5,
      metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
      cells: [{ cell_type: 'code', source: '', metadata: {}, outputs: [], execution_count: null }],
    },
  };
  const made = await inJupyter('PUT', 'api/contents/mnist.ipynb', notebook);
  assert.equal(made.status, 201, made.text);
  await jupyter.goto(`${edtd.base}${kBase}lab/tree/mnist.ipynb`);
  await jupyter.locator('.jp-Notebook .jp-Cell .cm-content').first().waitFor({ timeout: 60000 });
  await waitFor('the kernel to be idle', async () => {
    const sessions = JSON.parse((await inJupyter('GET', 'api/sessions')).text);
    return sessions.some((s) => s.path.endsWith('mnist.ipynb') && s.kernel?.execution_state === 'idle');
  }, { timeoutMs: 60000 });
  const hosts = await runCell('!cat /etc/mpi/hostfile', [/tthvd-worker-0 slots=1/], 30000);
  assert.deepEqual(hosts.trim().split('\n').map((l) => l.trim()), ['tthvd-launcher slots=1', 'tthvd-worker-0 slots=1']);
  // The kernel is the venv's Python, which sees Debian's torch and edt's package.
  await runCell("import sys, torch, edt; print('imported', torch.__version__, edt.__name__, sys.prefix)", [/imported \S+ edt \//], 60000);
  await runCell(
    `!edtrun -np 2 --hostfile /etc/mpi/hostfile python3 ${kTrain} --epochs 1 --data-dir /root/data/mnist`,
    [/epoch=1 rank=0 size=2 samples=5000/, /epoch=1 rank=1 size=2 samples=5000/], 240000);
  await screenshot('notebook', jupyter);
});

step("JupyterLab's Terminal draws a shell in the launcher, where typed commands find and run edtrun", async () => {
  await setJupyterTerminalText(jupyter, kBase);
  // As a user opens one: File, New, Terminal.
  await jupyter.goto(`${edtd.base}${kBase}lab`);
  const menuItem = (label) => jupyter.locator(`.lm-Menu-item:has(.lm-Menu-itemLabel:text-is("${label}"))`);
  await jupyter.locator('.lm-MenuBar-item', { hasText: 'File' }).click();
  await menuItem('New').hover();
  await menuItem('Terminal').click();
  const { terminal, screen } = await jupyterTerminal(jupyter);
  const box = await terminal.locator('.xterm-screen').boundingBox();
  assert.ok(box && box.width > 200 && box.height > 100, `the terminal's screen is ${JSON.stringify(box)}`);
  const text = await typeInTerminal(jupyter, '.jp-Terminal .xterm-screen', screen,
    'type edtrun; edtrun -np 2 --hostfile /etc/mpi/hostfile hostname; echo "@@$((40+2))"', /@@42/, 'edtrun in the terminal');
  assert.match(text, new RegExp(`edtrun is ${kBuild}/src/launcher/edtrun`));
  assert.match(text, /\[1\]<stdout>: ?tthvd-worker-0/);
  assert.match(text, /\[0\]<stdout>: ?tthvd-launcher/);
  await screenshot('terminal', jupyter);
});

// The console's terminal is a login on the container's sshd: Debian's
// /etc/profile resets PATH, and edt's /etc/profile.d/edt.sh puts edt's
// tools (here the build tree's) and the venv back in front.
step("the console's terminal, a login shell, finds edt's tools and the venv, and says nothing of lastlog", async () => {
  await page.goto(`${edtd.base}/#/clusters/tthvd/terminal/tthvd-launcher`);
  await waitFor('the terminal to connect', async () => (await page.textContent('#terminal-state')) === 'Connected');
  const screen = () => page.locator('#terminal .xterm-rows').innerText();
  await waitFor("the shell's prompt", async () => /tthvd-launcher:.*[#$]\s*$/m.test(await screen()));
  const text = await typeInTerminal(page, '#terminal .xterm', screen, 'type edtrun jupyter-lab; echo "@@$((40+2))"', /@@42/,
    'type in the console terminal');
  assert.match(text, new RegExp(`edtrun is ${kBuild}/src/launcher/edtrun`));
  assert.match(text, /jupyter-lab is \/\S+\/bin\/jupyter-lab/);
  assert.doesNotMatch(text, /lastlog/);
});

step("an interactive edt ssh, a login shell, finds edt's tools, imports torch and edt, and says nothing of lastlog", async () => {
  const { code, out } = await edtOnTerminal(['ssh', 'tthvd'],
    "type edtrun; python3 -c 'import torch, edt; print(\"imported\", torch.__version__)'; exit\n");
  assert.equal(code, 0, out);
  assert.match(out, new RegExp(`edtrun is ${kBuild}/src/launcher/edtrun`));
  assert.match(out, /imported \d/);
  assert.doesNotMatch(out, /lastlog/);
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

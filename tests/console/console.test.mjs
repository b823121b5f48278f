// The console's whole workflow in a real browser against a real edtd: sign
// in, create tthvd, see its containers Running, use the launcher's terminal,
// scale to 4, run a job and watch its log and chart, run a job and a terminal
// in a chosen worker, filter the cluster's jobs and events, the GPUs and their
// holders, volumes (a file uploaded into one), users and tokens,
// images, scale down past a drain, and every form error.
// The tests run in order and build on each other, as a user's session does.
// Each saves a screenshot under EDT_TEST_OUT.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before } from 'node:test';
import fs from 'node:fs';
import os from 'node:os';
import { containerPhases as phasesIn, Edtd, launchBrowser, outputDir, runInTerminal as runIn, Steps, terminalBuffer, underscoreInk, waitAllRunning as allRunningIn, waitFor, waitForText } from './harness.mjs';

const containerPhases = () => phasesIn(page);
const waitAllRunning = (n) => allRunningIn(page, n);
const runInTerminal = (command) => runIn(page, command);

const kViewport = { width: 1280, height: 800 };
const kHostfileLine = /^tthvd-(launcher|worker-\d+) slots=\d+$/;

let edtd;
let browser;
let page;
let shot = 0;
const pageErrors = [];

// A test that records its failure, so the end can keep edtd's data and log.
const steps = new Steps();
const step = steps.step;

async function screenshot(name, target = page) {
  shot += 1;
  const file = path.join(outputDir(), `${String(shot).padStart(2, '0')}-${name}.png`);
  await target.screenshot({ path: file, fullPage: true });
  return file;
}

async function openApp(target, hash) {
  await target.goto(`${edtd.base}/${hash}`);
}

function rowsIn(selector) {
  return page.locator(`${selector} tbody tr`);
}


// The event types the page lists, newest first.
async function eventTypes() {
  return page.$$eval('#events li[data-type]', (items) => items.map((li) => li.getAttribute('data-type')));
}

async function waitEvents(types) {
  await waitFor(`the events ${types.join(', ')}`, async () => (await eventTypes()).join() === types.join());
}


async function openTerminalInLauncher(target = page) {
  await openApp(target, '#/clusters/tthvd');
  await target.click('#open-terminal');
  await target.waitForURL(/#\/clusters\/tthvd\/terminal\/tthvd-launcher$/);
  await waitFor('the terminal to connect', async () => (await target.textContent('#terminal-state')) === 'Connected');
  await waitFor("the shell's prompt", async () => /tthvd-launcher:.*[#$]\s*$/m.test(await target.locator('#terminal .xterm-rows').innerText()));
}

// Types a line with underscores and checks it reads back: the buffer holds
// what was typed, and each underscore's pixels are drawn inside its cell.
async function checkUnderscores(target, scale) {
  const text = 'train_mnist.py CUDA_VISIBLE_DEVICES=3';
  assert.deepEqual(await runIn(target, `echo ${text}`), [text]);
  assert.ok((await terminalBuffer(target)).some((l) => l.includes(`echo ${text}; echo`)), 'the typed command is in the buffer as typed');
  const inks = await underscoreInk(target, text);
  assert.equal(inks.length, 3);
  inks.forEach((c, i) => {
    assert.ok(c.ink >= c.width / 2, `at scale ${scale}, underscore ${i + 1} of ${text} has ${c.ink} pixels in its ${c.width}x${c.height} cell: drawn outside it`);
    assert.ok(c.low >= c.ink / 2, `at scale ${scale}, underscore ${i + 1} is drawn in the upper half of its cell`);
  });
}

before(async () => {
  edtd = await Edtd.start();
  const volume = await edtd.api('POST', '/volumes', { name: 'data' });
  assert.equal(volume.status, 201, JSON.stringify(volume.json));
  browser = await launchBrowser();
  page = await browser.newPage({ viewport: kViewport, deviceScaleFactor: 1, colorScheme: 'light' });
  page.on('pageerror', (e) => pageErrors.push(e.message));
});

after(async () => {
  await browser?.close();
  await steps.end(edtd);
});

step('sign in: a wrong token is refused next to the field, the admin token signs in', async () => {
  await openApp(page, '');
  await page.waitForURL(/#\/signin$/);
  await page.fill('#token', 'not-a-token');
  await page.press('#token', 'Enter');
  await waitFor('the token error', async () => (await page.textContent('#token-error')).includes('does not know this token'));
  assert.equal(await page.getAttribute('#token', 'aria-invalid'), 'true');
  await screenshot('signin-wrong-token');

  await page.fill('#token', edtd.token);
  await page.press('#token', 'Enter');
  await page.waitForURL(/#\/clusters$/);
  await page.waitForSelector('#clusters td.empty');
  await waitFor('the user name in the header', async () => (await page.textContent('#who')) === 'admin');
  await screenshot('clusters-empty');
});

step('create tthvd with 2 containers, a GPU each, shared memory and a volume; both turn Running', async () => {
  await page.click('#create');
  await page.waitForSelector('#create-form');
  await page.fill('[data-field="name"]', 'tthvd');
  await page.fill('[data-field="containers"]', '2');
  assert.match(await page.textContent('#create-form'), /One is the launcher \(tthvd-launcher\), the rest are workers \(tthvd-worker-0\)\./);
  assert.equal(await page.locator('[data-field="image"] option').allTextContents().then((o) => o.join()), 'edt');
  await page.check('#gpu-enabled');
  const labelTops = await page.$$eval('#gpu-row label', (labels) => labels.map((l) => Math.round(l.getBoundingClientRect().top)));
  assert.equal(labelTops.length, 2);
  assert.equal(labelTops[0], labelTops[1], 'the GPU model and count labels are on one line');
  assert.match(await page.locator('[data-field="gpu.model"] option:checked').textContent(), /NVIDIA-P4 — 8 of 8 free \(simulated\)/);
  await page.check('#shm-enabled');
  await page.fill('[data-field="shm"]', '1Gi');
  await page.click('#add-mount');
  assert.equal(await page.inputValue('[data-field="mounts[0].path"]'), '/root/data');
  assert.equal(await page.inputValue('[data-field="drain_timeout"]'), '60s');
  await page.fill('[data-field="drain_timeout"]', '3s');
  await screenshot('create-form');

  await page.click('#create-submit');
  await page.waitForURL(/#\/clusters\/tthvd$/);
  await waitAllRunning(2);
  assert.deepEqual(Object.keys(await containerPhases()), ['tthvd-launcher', 'tthvd-worker-0']);
  // A count per container, never an index ("0" read as no GPU); the index in the title.
  for (const c of ['tthvd-launcher', 'tthvd-worker-0']) {
    const cell = page.locator(`#containers-table tr[data-container="${c}"] [data-col="gpus"]`);
    assert.equal(await cell.textContent(), '1 × NVIDIA-P4');
    assert.match(await cell.getAttribute('title'), /^GPU index \d+ of edtd's inventory$/);
  }
  await waitFor('a 2-line hostfile', async () => (await page.textContent('#hostfile')).trim().split('\n').length === 2);
  assert.match(await page.textContent('#overview'), /2 × NVIDIA-P4/);
  assert.match(await page.textContent('#overview'), /Drain timeout\s*3s/);
  await waitEvents(['Running', 'Created']);
  assert.match(await page.textContent('#events li[data-type="Created"]'), /created by admin with 2 containers/);
  await screenshot('cluster-running-2');
});

step('the launcher terminal shows a 2-line /etc/mpi/hostfile', async () => {
  await openTerminalInLauncher();
  assert.deepEqual(await runInTerminal('hostname'), ['tthvd-launcher']);
  const hostfile = await runInTerminal('cat /etc/mpi/hostfile');
  assert.equal(hostfile.length, 2, hostfile.join('\n'));
  hostfile.forEach((line) => assert.match(line, kHostfileLine));
  const home = await runInTerminal('ls -d /root/data');
  assert.deepEqual(home, ['/root/data']);
  await screenshot('terminal-hostfile-2');
});

step("the terminal at a device scale of 1 and 2: underscores drawn in their cells, the box holds the screen, the page does not scroll", async () => {
  await openTerminalInLauncher();
  await checkUnderscores(page, 1);
  await screenshot('terminal-underscores-scale-1');
  const box = await page.$eval('#terminal', (el) => {
    const outer = el.getBoundingClientRect();
    const inner = el.querySelector('.xterm-screen').getBoundingClientRect();
    return { spill: inner.bottom - (outer.bottom - parseFloat(getComputedStyle(el).paddingBottom)), scroll: document.documentElement.scrollHeight - window.innerHeight };
  });
  assert.ok(box.spill <= 0, `the terminal's screen spills ${box.spill}px below its box`);
  assert.ok(box.scroll <= 0, `the page scrolls ${box.scroll}px at ${kViewport.height}px tall`);

  const sharp = await browser.newPage({ viewport: kViewport, deviceScaleFactor: 2, colorScheme: 'light' });
  await sharp.addInitScript((token) => localStorage.setItem('edt.token', token), edtd.token);
  await openTerminalInLauncher(sharp);
  await checkUnderscores(sharp, 2);
  await screenshot('terminal-underscores-scale-2', sharp);
  await sharp.close();
});

step('scale to 4: a confirmation, then 4 Running and a 4-line hostfile', async () => {
  await openApp(page, '#/clusters/tthvd');
  await waitAllRunning(2);
  await page.fill('#scale-containers', '4');
  await page.click('#scale-submit');
  await page.waitForSelector('dialog[open]');
  assert.match(await page.textContent('dialog h2'), /Scale tthvd from 2 to 4 containers\?/);
  await page.click('#dialog-confirm');
  await waitFor('the banner of the scale', async () => (await page.textContent('.status')) === 'Scaling tthvd to 4 containers.');
  await waitAllRunning(4);
  await waitFor('the banner of the scale to go', async () => (await page.textContent('.status')) === '');
  await waitFor('a 4-line hostfile', async () => (await page.textContent('#hostfile')).trim().split('\n').length === 4);
  (await page.textContent('#hostfile')).trim().split('\n').forEach((line) => assert.match(line, kHostfileLine));
  await waitEvents(['Running', 'Scaling', 'Running', 'Created']);
  assert.match(await page.textContent('#events li[data-type="Scaling"]'), /scale from 2 to 4 containers/);
  await screenshot('cluster-running-4');

  await openTerminalInLauncher();
  const hostfile = await runInTerminal('cat /etc/mpi/hostfile');
  assert.equal(hostfile.length, 4, hostfile.join('\n'));
  await screenshot('terminal-hostfile-4');
});

step('run a job in the launcher: its log streams and its metrics are charted', async () => {
  await openApp(page, '#/clusters/tthvd');
  const command =
    "python3 -c \"import time; [print(f'epoch={e} loss={1/e:.3f} acc={1-0.4/e:.3f} samples/s={1000*e}', flush=True) or time.sleep(0.4) for e in range(1, 5)]\"";
  await page.fill('#job-command', command);
  await page.click('#run-submit');
  await page.waitForURL(/#\/jobs\/\d+$/);
  await waitFor('the last epoch in the log', async () => (await page.textContent('#job-log')).includes('epoch=4 loss=0.250 acc=0.900 samples/s=4000'));
  for (const metric of ['loss', 'acc', 'samples/s']) {
    await waitFor(`4 points of ${metric}`, async () => (await page.getAttribute(`svg[data-metric="${metric}"]`, 'data-points')) === '4');
  }
  await waitFor('the job to succeed', async () => (await page.getAttribute('[data-key="Phase"] [data-phase]', 'data-phase')) === 'Succeeded');
  assert.equal(await page.textContent('[data-key="Exit code"]'), '0');
  await screenshot('job-log-chart');

  await openApp(page, '#/clusters/tthvd');
  await waitFor('the job in the jobs list', async () => (await rowsIn('#jobs-table').count()) === 1 && (await page.textContent('#jobs-table')).includes('Succeeded'));
});

step('a job and a terminal in a chosen worker: each runs in that container', async () => {
  await openApp(page, '#/clusters/tthvd');
  await waitFor('the worker in the container choice', async () => (await page.locator('#job-container option[value="tthvd-worker-1"]').count()) === 1);
  assert.equal(await page.inputValue('#job-container'), 'tthvd-launcher', 'the launcher by default');
  await page.selectOption('#job-container', 'tthvd-worker-1');
  await page.fill('#job-command', 'hostname');
  await screenshot('job-in-worker');
  await page.click('#run-submit');
  await page.waitForURL(/#\/jobs\/\d+$/);
  await waitFor('the job to succeed', async () => (await page.getAttribute('[data-key="Phase"] [data-phase]', 'data-phase')) === 'Succeeded');
  await waitFor("the worker's hostname in the log", async () => (await page.textContent('#job-log')).trim() === 'tthvd-worker-1');
  assert.equal(await page.textContent('[data-key="Container"]'), 'tthvd-worker-1');

  await openApp(page, '#/clusters/tthvd');
  await page.click('a[aria-label="Terminal in tthvd-worker-0"]');
  await page.waitForURL(/#\/clusters\/tthvd\/terminal\/tthvd-worker-0$/);
  await waitFor('the terminal to connect', async () => (await page.textContent('#terminal-state')) === 'Connected');
  await waitFor("the worker shell's prompt", async () => /tthvd-worker-0:.*[#$]\s*$/m.test(await page.locator('#terminal .xterm-rows').innerText()));
  assert.deepEqual(await runInTerminal('hostname'), ['tthvd-worker-0']);
});

step("the cluster page's filters: jobs by container and by state, events by type, all from the keyboard too", async () => {
  await openApp(page, '#/clusters/tthvd');
  const jobContainers = () => page.$$eval('#jobs-table tr[data-job] [data-col="container"]', (cells) => cells.map((c) => c.textContent));
  await waitFor('both jobs listed', async () => (await jobContainers()).length === 2);
  await waitFor('the worker in the container filter', async () => (await page.locator('#jobs-container option[value="tthvd-worker-1"]').count()) === 1);
  await page.selectOption('#jobs-container', 'tthvd-worker-1');
  await waitFor("only the worker's job", async () => (await jobContainers()).join() === 'tthvd-worker-1');
  await page.selectOption('#jobs-container', '');
  await page.selectOption('#jobs-state', 'Failed');
  await waitFor('no failed job', async () => (await page.textContent('#jobs-table tbody')).includes('No jobs match the filter.'));
  await page.selectOption('#jobs-state', 'Succeeded');
  await waitFor('both succeeded jobs', async () => (await jobContainers()).length === 2);
  await page.selectOption('#jobs-state', '');

  await waitFor('a Scaling event among others', async () => {
    const types = await eventTypes();
    return types.includes('Scaling') && types.some((t) => t !== 'Scaling');
  });
  // Keyboard: the Type filter is in the Tab order.
  await page.focus('#events-type');
  await page.keyboard.press('Shift+Tab');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'events-type');
  await page.selectOption('#events-type', 'Scaling');
  await waitFor('only Scaling events', async () => {
    const types = await eventTypes();
    return types.length > 0 && types.every((t) => t === 'Scaling');
  });
  await screenshot('events-filtered');
  await page.selectOption('#events-type', 'DrainTimedOut');
  await waitFor('no DrainTimedOut event yet', async () => (await page.textContent('#events')).includes('No events match the filter.'));
  await page.selectOption('#events-type', '');
  await page.selectOption('#events-since', '10');
  await waitFor('the recent events', async () => (await eventTypes()).length > 0);
  await page.selectOption('#events-since', '0');
  // edtd refuses what the selects cannot send, naming the parameter.
  const refused = await edtd.api('GET', '/clusters/tthvd/events?type=scaling');
  assert.equal(refused.status, 400);
  assert.equal(refused.json.error.field, 'type');
  assert.equal((await edtd.api('GET', '/clusters/tthvd/jobs?state=done')).json.error.field, 'state');
});

step('GPUs: the 4 that tthvd holds name their container and cluster, the other 4 are free', async () => {
  await openApp(page, '#/clusters');
  await page.click('#nav-gpus');
  await page.waitForURL(/#\/gpus$/);
  await waitFor('8 GPUs', async () => (await rowsIn('#gpus-table').count()) === 8 && (await page.textContent('#gpus-summary')) === '4 of 8 free.');
  const held = await page.$$eval('#gpus-table tr[data-state="named"]', (rows) =>
    rows.map((r) => [r.querySelector('[data-col="holder"]').textContent, r.querySelector('[data-col="cluster"]').textContent]),
  );
  assert.deepEqual(held.map(([holder]) => holder).sort(), ['tthvd-launcher', 'tthvd-worker-0', 'tthvd-worker-1', 'tthvd-worker-2']);
  assert.deepEqual([...new Set(held.map(([, cluster]) => cluster))], ['tthvd']);
  assert.equal(await page.locator('#gpus-table tr[data-state="free"]').count(), 4);
  await screenshot('gpus');
});

step('volumes: who mounts each, create one (a bad name is shown next to the field), a refused delete shows in its row, delete', async () => {
  await openApp(page, '#/volumes');
  const data = page.locator('#volumes-table tr[data-volume="data"]');
  await waitFor('data mounted by tthvd', async () => (await data.locator('[data-col="mounted-by"]').textContent()) === 'tthvd');
  await page.fill('#volume-name', 'Results');
  await page.click('#volume-create');
  await waitFor('the name error', async () => /"Results" is not a DNS label/.test(await page.textContent('#volume-name-error')));
  assert.equal(await page.getAttribute('#volume-name', 'aria-invalid'), 'true');
  await page.fill('#volume-name', 'results');
  await page.fill('#volume-host-path', '/nonexistent/dir');
  await page.click('#volume-create');
  await waitFor("edtd's host_path error", async () => /host_path \/nonexistent\/dir is not a directory on the host/.test(await page.textContent('#volume-host-path-error')));
  await page.fill('#volume-host-path', '');
  await page.click('#volume-create');
  const results = page.locator('#volumes-table tr[data-volume="results"]');
  await waitFor('results in the list', async () => (await results.count()) === 1);
  assert.equal(await results.locator('[data-col="mounted-by"]').textContent(), 'no cluster');
  assert.equal((await edtd.api('GET', '/volumes')).json.volumes.filter((v) => v.name === 'results').length, 1);

  await data.locator('button').click();
  await page.click('#dialog-confirm');
  await waitFor('the 409 in the row of data', async () => /volume 'data' is mounted by cluster tthvd; delete that cluster first/.test(await page.textContent('[data-row-error="data"]')));
  await screenshot('volumes-delete-refused');
  await results.locator('button').click();
  await page.click('#dialog-confirm');
  await waitFor('results to go', async () => (await results.count()) === 0);
  assert.equal((await edtd.api('GET', '/volumes')).json.volumes.some((v) => v.name === 'results'), false);
});

step('volumes: upload a file into data (a hostile path is refused next to the path); the launcher reads it', async () => {
  await openApp(page, '#/volumes');
  await waitFor('data in the upload form', async () => (await page.locator('#upload-volume option[value="data"]').count()) === 1);
  await page.selectOption('#upload-volume', 'data');
  await page.setInputFiles('#upload-file', { name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from('hello from the console\n') });
  await page.fill('#upload-path', '..');
  await page.click('#upload-submit');
  await waitFor('the refusal next to the path', async () => /has a '\.\.' segment/.test(await page.textContent('#upload-path-error')));
  assert.equal(await page.getAttribute('#upload-path', 'aria-invalid'), 'true');
  assert.equal(await page.textContent('#upload-state'), 'Upload failed.');
  await page.fill('#upload-path', 'inputs');
  await page.click('#upload-submit');
  await waitFor('done beside the button', async () => (await page.textContent('#upload-state')) === 'Uploaded 23 bytes to data as inputs/hello.txt.');
  assert.equal(await page.textContent('#upload-path-error'), '');
  await screenshot('volume-upload');
  // Another pick starts from an empty folder: the last upload's is not reused unseen.
  await page.setInputFiles('#upload-file', { name: 'other.txt', mimeType: 'text/plain', buffer: Buffer.from('x') });
  assert.equal(await page.inputValue('#upload-path'), '');
  // The container's user reads (and may write) it where tthvd mounts data.
  const job = await edtd.api('POST', '/clusters/tthvd/jobs', { command: 'cat /root/data/inputs/hello.txt; stat -c %a /root/data/inputs/hello.txt; echo more >> /root/data/inputs/hello.txt && echo writable' });
  assert.equal(job.status, 201, JSON.stringify(job.json));
  await waitFor('the job to end', async () => (await edtd.api('GET', `/jobs/${job.json.id}`)).json.state !== 'Running');
  const log = await fetch(`${edtd.base}/api/v1/jobs/${job.json.id}/log?follow=false`, { headers: { Authorization: `Bearer ${edtd.token}` } });
  assert.equal(await log.text(), 'hello from the console\n644\nwritable\n');
});

step("jobs start in the first volume's directory, or in the one given; a relative one is refused next to it", async () => {
  await openApp(page, '#/clusters/tthvd');
  assert.match(await page.textContent('#job-cwd-help'), /starts in \/root\/data, where the first volume is mounted/);
  assert.equal(await page.getAttribute('#job-cwd', 'placeholder'), '/root/data');
  await page.fill('#job-command', 'pwd; cat inputs/hello.txt');
  await page.click('#run-submit');
  await page.waitForURL(/#\/jobs\/\d+$/);
  await waitForText(page, '#job-log', '/root/data\nhello from the console\nmore\n', 'the job to run in /root/data');
  await openApp(page, '#/clusters/tthvd');
  await page.fill('#job-cwd', 'inputs');
  await page.fill('#job-command', 'pwd');
  await page.click('#run-submit');
  await waitFor('the refusal next to the directory', async () => /cwd 'inputs' is not absolute/.test(await page.textContent('#job-cwd-error')));
  assert.equal(await page.getAttribute('#job-cwd', 'aria-invalid'), 'true');
  await page.fill('#job-cwd', '/root/data/inputs');
  await page.click('#run-submit');
  await page.waitForURL(/#\/jobs\/\d+$/);
  await waitForText(page, '#job-log', '/root/data/inputs\n', 'the job to run where it was told');
});

step("a volume's files: list with sizes and folders, upload several files and a folder (an overwrite asked first), download, delete", async () => {
  await openApp(page, '#/volumes');
  await page.click('a[aria-label="Files of data"]');
  await page.waitForURL(/#\/volumes\/data\/files$/);
  await waitFor('the inputs folder', async () => (await page.locator('#files-table tr[data-entry="inputs"][data-type="directory"]').count()) === 1);
  await page.click('#files-table a:text("inputs/")');
  await page.waitForURL(/#\/volumes\/data\/files\/inputs$/);
  const hello = page.locator('#files-table tr[data-entry="hello.txt"]');
  await waitFor('hello.txt and its size', async () => (await hello.locator('[data-col="size"]').textContent()) === '28 B');
  assert.equal(await page.inputValue('#upload-path'), 'inputs', 'the upload goes to the folder shown');

  // Several files, one of them there already: the replace is asked first.
  await page.setInputFiles('#upload-file', [
    { name: 'a.txt', mimeType: 'text/plain', buffer: Buffer.from('aaa') },
    { name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from('replaced\n') },
  ]);
  await page.click('#upload-submit');
  await page.waitForSelector('dialog[open]');
  assert.match(await page.textContent('dialog h2'), /Replace 1 file in data\?/);
  assert.match(await page.textContent('dialog'), /inputs\/hello\.txt/);
  await page.click('dialog button[value="cancel"]');
  await waitFor('nothing uploaded', async () => (await page.textContent('#upload-state')) === 'Nothing uploaded.');
  assert.equal(await page.locator('#files-table tr[data-entry="a.txt"]').count(), 0);
  await page.click('#upload-submit');
  await page.click('#dialog-confirm');
  await waitFor('both uploaded', async () => (await page.textContent('#upload-state')) === 'Uploaded 2 files (12 bytes) to data.');
  await waitFor('a.txt listed', async () => (await page.locator('#files-table tr[data-entry="a.txt"]').count()) === 1);

  // A folder, its own folders kept.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edt-console-folder-'));
  fs.mkdirSync(path.join(dir, 'set', 'sub'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'set', 'one.txt'), '1');
  fs.writeFileSync(path.join(dir, 'set', 'sub', 'two.txt'), '22');
  await page.setInputFiles('#upload-folder', path.join(dir, 'set'));
  await page.click('#upload-submit');
  await waitFor('the folder uploaded', async () => /^Uploaded 2 files \(3 bytes\) to data\.$/.test(await page.textContent('#upload-state')));
  fs.rmSync(dir, { recursive: true, force: true });
  await waitFor('set listed as a folder', async () => (await page.locator('#files-table tr[data-entry="set"][data-type="directory"]').count()) === 1);
  await screenshot('volume-files');

  const [download] = await Promise.all([page.waitForEvent('download'), hello.locator('button[aria-label="Download hello.txt"]').click()]);
  assert.equal(download.suggestedFilename(), 'hello.txt');
  assert.equal(fs.readFileSync(await download.path(), 'utf8'), 'replaced\n');

  await page.click('#files-table button[aria-label="Delete set"]');
  assert.match(await page.textContent('dialog'), /The folder and everything in it go/);
  await page.click('#dialog-confirm');
  await waitFor('set to go', async () => (await page.locator('#files-table tr[data-entry="set"]').count()) === 0);
  await page.click('#files-table button[aria-label="Delete a.txt"]');
  await page.click('#dialog-confirm');
  await waitFor('a.txt to go', async () => (await page.locator('#files-table tr[data-entry="a.txt"]').count()) === 0);
  const left = (await edtd.api('GET', '/volumes/data/files?path=inputs')).json.entries.map((e) => e.name);
  assert.deepEqual(left, ['hello.txt']);
  // Restores what the later steps read.
  assert.equal((await edtd.api('DELETE', '/volumes/data/files?path=inputs')).status, 200);
});

step('users and tokens: create alice (her token shown once, copied), list and revoke tokens, a refused delete, delete', async () => {
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: edtd.base });
  await openApp(page, '#/users');
  await waitFor('admin in the users list', async () => (await page.locator('#users-table tr[data-user="admin"]').count()) === 1);
  await page.fill('#user-name', 'alice');
  await page.click('#user-create');
  await page.waitForSelector('#new-token');
  const token = await page.textContent('#new-token');
  assert.match(token, /^edt_[0-9a-f]{64}$/);
  await page.click('#new-token-copy');
  await waitFor('Copied', async () => (await page.textContent('#new-token-copied')) === 'Copied.');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), token);
  await screenshot('user-created-token');
  const asAlice = (method, route) => fetch(`${edtd.base}/api/v1${route}`, { method, headers: { Authorization: `Bearer ${token}` } });
  assert.equal((await (await asAlice('GET', '/whoami')).json()).name, 'alice');

  // Her tokens: the first, then one that expires, then the first revoked.
  await page.click('a[aria-label="Tokens of alice"]');
  await page.waitForURL(/#\/users\/alice$/);
  await waitFor('one token', async () => (await rowsIn('#tokens-table').count()) === 1);
  const firstId = await page.getAttribute('#tokens-table tbody tr', 'data-token');
  assert.equal(await page.textContent(`tr[data-token="${firstId}"] [data-col="state"]`), 'Valid');
  await page.fill('#token-expires', '2w');
  await page.click('#token-create');
  await waitFor('the lifetime error', async () => /"2w" is not a lifetime/.test(await page.textContent('#token-expires-error')));
  await page.fill('#token-expires', '1d');
  await page.fill('#token-description', 'ci runner');
  await page.click('#token-create');
  await waitFor('two tokens', async () => (await rowsIn('#tokens-table').count()) === 2);
  const second = await page.textContent('#new-token');
  assert.match(second, /^edt_[0-9a-f]{64}$/);
  assert.notEqual(second, token);
  assert.match(await page.textContent('#tokens-table'), /ci runner/);
  await screenshot('user-tokens');
  await page.click(`button[aria-label="Revoke token ${firstId}"]`);
  await page.click('#dialog-confirm');
  await waitFor('the first token gone', async () => (await page.locator(`tr[data-token="${firstId}"]`).count()) === 0);
  assert.equal((await asAlice('GET', '/whoami')).status, 401, 'a revoked token stops working');

  // Alice owns a volume: edtd refuses to delete her, and the refusal shows in her row.
  const volume = await fetch(`${edtd.base}/api/v1/volumes`, { method: 'POST', headers: { Authorization: `Bearer ${second}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'alices' }) });
  assert.equal(volume.status, 201);
  await openApp(page, '#/users');
  const alice = page.locator('#users-table tr[data-user="alice"]');
  await waitFor('alice in the list', async () => (await alice.count()) === 1);
  await alice.locator('button').click();
  await page.click('#dialog-confirm');
  await waitFor('the refusal in her row', async () => /user 'alice' still owns 0 cluster\(s\) and 1 volume\(s\)/.test(await page.textContent('[data-row-error="alice"]')));
  await screenshot('user-delete-refused');
  assert.equal((await edtd.api('DELETE', '/volumes/alices')).status, 200);
  await alice.locator('button').click();
  await page.click('#dialog-confirm');
  await waitFor('alice to go', async () => (await alice.count()) === 0);
  assert.equal((await (await fetch(`${edtd.base}/api/v1/whoami`, { headers: { Authorization: `Bearer ${second}` } })).status), 401);

  // The admin's last valid token is kept: the 409 shows in its row.
  await openApp(page, '#/users/admin');
  await waitFor("the admin's token", async () => (await rowsIn('#tokens-table').count()) === 1);
  await page.click('#tokens-table tbody button');
  await page.click('#dialog-confirm');
  await waitFor('the refusal in its row', async () => /is the admin's last valid token; make another first/.test(await page.textContent('#tokens-table [data-row-error]')));
  assert.equal((await edtd.api('GET', '/whoami')).status, 200);
});

step('images: the built-in one is listed; the admin registers one, with errors next to their fields', async () => {
  await openApp(page, '#/images');
  await waitFor('the edt image', async () => /Horovod/.test(await page.textContent('#images-table tr[data-image="edt"]')));
  await page.fill('#image-name', 'hostroot');
  await page.click('#image-create');
  await waitFor('the frameworks error', async () => /at least one framework/.test(await page.textContent('#image-frameworks-error')));
  await page.check('#image-framework-horovod');
  await page.fill('#image-root', '/nonexistent');
  await page.click('#image-create');
  await waitFor("edtd's root error", async () => /root '\/nonexistent' is not a directory with a \/usr/.test(await page.textContent('#image-root-error')));
  await page.fill('#image-root', '/');
  await page.click('#image-create');
  const row = page.locator('#images-table tr[data-image="hostroot"]');
  await waitFor('hostroot in the list', async () => (await row.count()) === 1);
  assert.match(await row.textContent(), /Horovod/);
  await screenshot('images');
  const { json } = await edtd.api('GET', '/images');
  assert.deepEqual(json.images.find((i) => i.name === 'hostroot')?.frameworks, ['horovod']);
});

step('the clusters list shows tthvd with 4/4 Running and its GPUs; selecting it enables Delete', async () => {
  await openApp(page, '#/clusters');
  const row = page.locator('#clusters tr[data-cluster="tthvd"]');
  await waitFor('tthvd in the list', async () => (await row.count()) === 1);
  assert.equal(await row.locator('[data-col="containers"]').textContent(), '4/4');
  assert.equal(await row.locator('[data-phase]').getAttribute('data-phase'), 'Running');
  assert.match(await row.textContent(), /Horovod.*4 × NVIDIA-P4/);
  assert.equal(await page.isDisabled('#delete-selected'), true);
  await row.locator('input[type="checkbox"]').check();
  assert.equal(await page.isDisabled('#delete-selected'), false);
  await screenshot('clusters-list');
});

// Each case: what to enter, the field whose error shows, and what it says.
const kFormCases = [
  { name: 'bad-name', fill: { name: 'TT_hvd' }, field: 'name', error: /DNS label/ },
  { name: 'taken-name', fill: { name: 'tthvd' }, field: 'name', error: /cluster named "tthvd" exists already/ },
  { name: 'one-container', fill: { name: 'one', containers: '1' }, field: 'containers', error: /at least 2 containers: one launcher/ },
  { name: 'containers-not-a-number', fill: { name: 'x', containers: '2.5' }, field: 'containers', error: /whole number/ },
  { name: 'too-many-gpus', fill: { name: 'big', containers: '5' }, gpu: '2', field: 'gpu.count', error: /5 containers × 2 GPUs = 10 NVIDIA-P4, but this platform has only 8/ },
  { name: 'bad-shm', fill: { name: 'shm' }, shm: 'lots', field: 'shm', error: /"lots" is not a size/ },
  { name: 'relative-mount', fill: { name: 'm' }, mount: 'data', field: 'mounts[0].path', error: /is relative/ },
  { name: 'dotdot-mount', fill: { name: 'm' }, mount: '/root/../etc', field: 'mounts[0].path', error: /contains "\.\."/ },
  { name: 'system-mount', fill: { name: 'm' }, mount: '/usr/local', field: 'mounts[0].path', error: /covers the system directory \/usr/ },
];

step('each bad input in the create form is shown next to its field, and nothing is created', async () => {
  for (const c of kFormCases) {
    await openApp(page, '#/clusters');
    await openApp(page, '#/create');
    await page.waitForSelector('#create-form');
    for (const [field, value] of Object.entries(c.fill)) await page.fill(`[data-field="${field}"]`, value);
    if (c.gpu) {
      await page.check('#gpu-enabled');
      await page.fill('[data-field="gpu.count"]', c.gpu);
    }
    if (c.shm) {
      await page.check('#shm-enabled');
      await page.fill('[data-field="shm"]', c.shm);
    }
    if (c.mount) {
      await page.click('#add-mount');
      await page.fill('[data-field="mounts[0].path"]', c.mount);
    }
    await page.click('#create-submit');
    const error = page.locator(`[data-error-for="${c.field}"]`);
    await waitFor(`the ${c.name} error`, async () => c.error.test(await error.textContent()));
    assert.equal(await page.getAttribute(`[data-field="${c.field}"]`, 'aria-invalid'), 'true', c.name);
    // The focus goes to the first field in error, for keyboard users.
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-invalid')), 'true', c.name);
    assert.match(page.url(), /#\/create$/, `${c.name}: the form stays`);
    await screenshot(`form-error-${c.name}`);
  }
  const { json } = await edtd.api('GET', '/clusters');
  assert.deepEqual(json.clusters.map((c) => c.name), ['tthvd'], 'no cluster was made from a bad form');
});

step("edtd's own refusal lands next to the field it names", async () => {
  // The form loads while the volume exists; it is gone by the time the form
  // is sent, which only edtd can know.
  assert.equal((await edtd.api('POST', '/volumes', { name: 'scratch' })).status, 201);
  await openApp(page, '#/clusters');
  await openApp(page, '#/create');
  await page.waitForSelector('#create-form');
  await page.fill('[data-field="name"]', 'late');
  await page.click('#add-mount');
  await page.selectOption('[data-field="mounts[0].volume"]', 'scratch');
  assert.equal((await edtd.api('DELETE', '/volumes/scratch')).status, 200);
  await page.click('#create-submit');
  const error = page.locator('[data-error-for="mounts[0].volume"]');
  await waitFor("edtd's unknown-volume error", async () => /unknown volume 'scratch'; create it first/.test(await error.textContent()));
  await screenshot('form-error-from-edtd');
  assert.equal((await edtd.api('GET', '/clusters/late')).status, 404);
});

step('keyboard only: Tab reaches Create, Enter opens the form with the focus in Name, Enter submits', async () => {
  await openApp(page, '#/clusters');
  await page.waitForSelector('#clusters tr[data-cluster="tthvd"]');
  await page.locator('body').focus();
  const reached = await waitFor('Tab to reach Create', async () => {
    await page.keyboard.press('Tab');
    return (await page.evaluate(() => document.activeElement?.id)) === 'create';
  }, { timeoutMs: 10000, intervalMs: 0 });
  assert.ok(reached);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#create-form');
  await waitFor('the focus in Name', async () => (await page.evaluate(() => document.activeElement?.getAttribute('data-field'))) === 'name');
  await page.keyboard.type('Not Valid');
  await page.keyboard.press('Enter');
  await waitFor('the name error', async () => /DNS label/.test(await page.textContent('[data-error-for="name"]')));
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('data-field')), 'name');
  await screenshot('keyboard-create');
});

step('scale down to 2 while a training worker runs in a leaving container: it is Draining, then its drain times out', async () => {
  // edtd counts a process with EDT_COORDINATOR in its environment (what
  // edtrun gives each worker) as a worker of a training job.
  const command = `EDT_COORDINATOR=127.0.0.1:1 python3 -c "print('ready', flush=True); import time; time.sleep(300)"`;
  const started = await edtd.api('POST', '/clusters/tthvd/jobs', { command, container: 'tthvd-worker-2' });
  assert.equal(started.status, 201, JSON.stringify(started.json));
  await waitFor('the worker to run', async () => String((await edtd.api('GET', `/jobs/${started.json.id}/log?follow=false`)).json).includes('ready'));
  await openApp(page, '#/clusters/tthvd');
  await waitAllRunning(4);
  await page.fill('#scale-containers', '2');
  await page.click('#scale-submit');
  await page.waitForSelector('dialog[open]');
  await page.click('#dialog-confirm');
  await waitFor('tthvd-worker-2 Draining', async () => (await containerPhases())['tthvd-worker-2'] === 'Draining');
  assert.match(await page.textContent('#scale-help'), /Draining/);
  assert.match(await page.textContent('#overview'), /tthvd-worker-2 leave the hostfile and drain/);
  await screenshot('cluster-draining');
  await waitAllRunning(2);
  await waitFor('the DrainTimedOut event', async () => (await eventTypes()).includes('DrainTimedOut'));
  assert.match(await page.textContent('#events li[data-type="DrainTimedOut"]'), /tthvd-worker-2: drain timed out after 3s; 1 edtrun worker process was still in it/);
  assert.match(await page.textContent('#events li[data-type="Drained"]'), /tthvd-worker-1 drained in/);
  await screenshot('cluster-drain-timed-out');
});

step('a narrow window in the dark theme: every page fits without scrolling sideways', async () => {
  const narrow = await browser.newPage({ viewport: { width: 390, height: 844 }, colorScheme: 'dark' });
  await narrow.addInitScript((token) => localStorage.setItem('edt.token', token), edtd.token);
  for (const [hash, ready, name] of [
    ['#/clusters', '#clusters tr[data-cluster="tthvd"]', 'narrow-dark-clusters'],
    ['#/clusters/tthvd', '#containers-table tr[data-container]', 'narrow-dark-cluster'],
    ['#/create', '#create-form', 'narrow-dark-create'],
    ['#/jobs/1', 'svg[data-metric="loss"]', 'narrow-dark-job'],
    ['#/volumes', '#volumes-table tr[data-volume="data"]', 'narrow-dark-volumes'],
    ['#/users', '#users-table tr[data-user="admin"]', 'narrow-dark-users'],
    ['#/users/admin', '#tokens-table tr[data-token]', 'narrow-dark-tokens'],
    ['#/images', '#images-table tr[data-image="edt"]', 'narrow-dark-images'],
    ['#/gpus', '#gpus-table tr[data-gpu]', 'narrow-dark-gpus'],
  ]) {
    await openApp(narrow, hash);
    await narrow.waitForSelector(ready);
    const overflow = await narrow.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `${hash} is ${overflow}px wider than the window`);
    const background = await narrow.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(background, 'rgb(13, 17, 23)', 'the dark theme is applied');
    await screenshot(name, narrow);
  }
  await narrow.close();
});

step('sign out forgets the token', async () => {
  await openApp(page, '#/clusters');
  await page.click('#sign-out');
  await page.waitForURL(/#\/signin$/);
  await openApp(page, '#/clusters/tthvd');
  await page.waitForURL(/#\/signin$/);
  await waitFor('why it went to sign-in', async () => (await page.textContent('.status')) === 'You are signed out: sign in to see cluster.');
  await page.click('#nav-volumes');
  await waitFor('why, again', async () => (await page.textContent('.status')) === 'You are signed out: sign in to see volumes.');
  assert.equal(await page.evaluate(() => localStorage.getItem('edt.token')), null);
  const icon = await fetch(`${edtd.base}/favicon.ico`);
  assert.equal(icon.status, 200);
  assert.equal(icon.headers.get('content-type'), 'image/x-icon');
  assert.deepEqual(pageErrors, [], 'no uncaught errors in the page');
});

step("teams (its own page): create ml, a bad quota count next to its field, set NVIDIA-P4 4 + unlimited, put admin in ml, delete", async () => {
  const own = await browser.newPage({ viewport: kViewport });
  own.on('pageerror', (e) => pageErrors.push(e.message));
  await own.addInitScript((token) => localStorage.setItem('edt.token', token), edtd.token);
  await openApp(own, '#/teams');
  await own.fill('#team-name', 'ml');
  await own.click('#team-form-submit');
  await own.waitForSelector('section[data-team="ml"]');
  await own.selectOption('#quota-team', 'ml');
  await own.selectOption('#quota-model', 'NVIDIA-P4');
  await own.fill('#quota-guaranteed', 'four');
  await own.click('#quota-form-submit');
  await waitFor('the count error', async () => (await own.textContent('#quota-guaranteed-error')).includes('whole number of GPUs'));
  await own.fill('#quota-guaranteed', '4');
  await own.click('#quota-form-submit');
  const row = 'tr[data-quota="ml/NVIDIA-P4"]';
  await waitFor('the quota row', async () => (await own.textContent(`${row} [data-col="borrow"]`).catch(() => '')) === 'unlimited');
  await own.selectOption('#assign-user', 'admin');
  await own.selectOption('#assign-team', 'ml');
  await own.click('#assign-form-submit');
  await waitFor('admin in ml', async () => (await own.textContent('[data-members="ml"]')) === 'Members: admin');
  await screenshot('teams', own);
  await own.click('[aria-label="Delete team ml"]');
  await own.click('#dialog-confirm');
  await own.waitForSelector('section[data-team="ml"]', { state: 'detached' });
  await own.close();
});

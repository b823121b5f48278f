// The walkthrough a new user follows, in the console, as a user does it:
// sign in, make a volume and upload the training files into it (the MNIST
// example's script and its dataset folder), create the Horovod cluster
// tthvd (2 containers, a simulated GPU each, 1 GiB of shared memory, the
// volume), open the console's terminal and type the commands (the tools,
// the hostfile, training on 2), run the Jobs panel's suggested command,
// scale to 4 in the console, train on 4, open
// JupyterLab and type a command in its Terminal, and delete the cluster.
// Every command's output is read off the screen; the screenshots (a device
// scale of 1) show `train_mnist.py` with its underscore drawn, which the
// test checks by its pixels, and the terminal's buffer holds what was typed.
// The tests run in order and build on each other, as the user's session.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before } from 'node:test';
import { Edtd, launchBrowser, openJupyterTerminal, outputDir, runInTerminal, Steps, terminalBuffer, underscoreInk, waitAllRunning, waitFor } from './harness.mjs';

const kSource = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const kTrain = path.join(kSource, 'examples/mnist/train_mnist.py');
// The synthetic MNIST set the build keeps (the mnist_data fixture), as scripts/demo.py uploads it.
const kData = process.env.EDT_MNIST_DATA;
const kJupyter = '/c/tthvd/jupyter/';
const kEpoch = (np, rank) => new RegExp(`epoch=1 rank=${rank} size=${np} samples=${10000 / np} loss=[\\d.]+ acc=[\\d.]+`);
const kTrainTimeoutMs = 300000;

let edtd;
let browser;
let page;
let jupyter;
let shot = 0;

const steps = new Steps(async (name) => {
  await screenshot(`failed-${name.slice(0, 24).replace(/\W+/g, '-')}`, jupyter && !jupyter.isClosed() ? jupyter : page).catch(() => {});
});
const step = steps.step;

async function screenshot(name, target = page) {
  shot += 1;
  await target.screenshot({ path: path.join(outputDir(), `walkthrough-${String(shot).padStart(2, '0')}-${name}.png`) });
}

async function openTerminal() {
  await page.goto(`${edtd.base}/#/clusters/tthvd`);
  await page.click('#open-terminal');
  await page.waitForURL(/#\/clusters\/tthvd\/terminal\/tthvd-launcher$/);
  await waitFor('the terminal to connect', async () => (await page.textContent('#terminal-state')) === 'Connected');
  await waitFor("the shell's prompt", async () => /tthvd-launcher:.*[#$]\s*$/m.test(await page.locator('#terminal .xterm-rows').innerText()));
}

// Trains for an epoch on `np` workers from the terminal; checks each rank's
// epoch line on the screen, and the script's name drawn legibly there.
async function train(np) {
  const command = `edtrun -np ${np} --hostfile /etc/mpi/hostfile python3 train_mnist.py --epochs 1`;
  const out = await runInTerminal(page, `cd ~/mnist && ${command}`, { timeoutMs: kTrainTimeoutMs });
  for (let rank = 0; rank < np; rank++) assert.ok(out.some((l) => kEpoch(np, rank).test(l)), `rank ${rank}'s epoch line in:\n${out.join('\n')}`);
  assert.ok((await terminalBuffer(page)).some((l) => l.includes(command)), 'the buffer holds the command as typed');
  const inks = await underscoreInk(page, 'train_mnist.py --epochs 1');
  assert.ok(inks.length === 1 && inks[0].ink >= inks[0].width / 2, `the underscore of train_mnist.py is drawn in its cell: ${JSON.stringify(inks)}`);
  await screenshot(`trained-np${np}`);
}

before(async () => {
  assert.ok(kData, 'EDT_MNIST_DATA is not set; run this test through ctest');
  edtd = await Edtd.start();
  browser = await launchBrowser();
  page = await browser.newPage({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1, colorScheme: 'light' });
});

after(async () => {
  await browser?.close();
  await steps.end(edtd);
});

step('sign in with the admin token', async () => {
  await page.goto(`${edtd.base}/`);
  await page.waitForURL(/#\/signin$/);
  await page.fill('#token', edtd.token);
  await page.press('#token', 'Enter');
  await page.waitForURL(/#\/clusters$/);
});

step('make the volume mnist and upload the training script and the dataset folder into it', async () => {
  await page.click('#nav-volumes');
  await page.fill('#volume-name', 'mnist');
  await page.click('#volume-create');
  await page.locator('#volumes-table tr[data-volume="mnist"]').waitFor();
  await page.click('a[aria-label="Files of mnist"]');
  await page.waitForURL(/#\/volumes\/mnist\/files$/);
  await page.setInputFiles('#upload-file', kTrain);
  await page.click('#upload-submit');
  await waitFor('the script uploaded', async () => /^Uploaded \d+ bytes to mnist as train_mnist\.py\.$/.test(await page.textContent('#upload-state')));
  await page.setInputFiles('#upload-folder', kData);
  await page.click('#upload-submit');
  await waitFor('the dataset uploaded', async () => /^Uploaded 4 files \(\d+ bytes\) to mnist\.$/.test(await page.textContent('#upload-state')), { timeoutMs: 120000 });
  // Beside them, a volume on a disk of its own holds the file system's lost+found.
  await waitFor('both listed', async () => (await page.locator('#files-table tr[data-entry="train_mnist.py"][data-type="file"]').count()) === 1);
  assert.equal(await page.getAttribute('#files-table tr[data-entry="mnist-data"]', 'data-type'), 'directory');
  await screenshot('volume-files');
});

step('create tthvd: Horovod, 2 containers with a simulated GPU each, 1 GiB of shared memory, the volume at ~/mnist', async () => {
  await page.click('#nav-clusters');
  await page.click('#create');
  await page.waitForSelector('#create-form');
  await page.fill('[data-field="name"]', 'tthvd');
  await page.fill('[data-field="containers"]', '2');
  await page.check('#gpu-enabled');
  await page.fill('[data-field="gpu.count"]', '1');
  await page.check('#shm-enabled');
  await page.fill('[data-field="shm"]', '1Gi');
  await page.click('#add-mount');
  await page.selectOption('[data-field="mounts[0].volume"]', 'mnist');
  await page.fill('[data-field="mounts[0].path"]', '/root/mnist');
  await screenshot('create-form');
  await page.click('#create-submit');
  await page.waitForURL(/#\/clusters\/tthvd$/);
  await waitAllRunning(page, 2);
  assert.equal(await page.textContent('#containers-table tr[data-container="tthvd-launcher"] [data-col="gpus"]'), '1 × NVIDIA-P4');
  await screenshot('cluster-running-2');
});

step("the console's terminal: the tools, the hostfile, and training on 2", async () => {
  await openTerminal();
  const tools = await runInTerminal(page, 'type edtrun horovodrun');
  assert.match(tools[0] ?? '', /^edtrun is \//, tools.join('\n'));
  assert.match(tools[1] ?? '', /^horovodrun is \//, tools.join('\n'));
  const hostfile = await runInTerminal(page, 'cat /etc/mpi/hostfile');
  assert.deepEqual(hostfile, ['tthvd-launcher slots=1', 'tthvd-worker-0 slots=1']);
  await train(2);
});

step("the Jobs panel's suggested command runs as it is, from the volume", async () => {
  await page.goto(`${edtd.base}/#/clusters/tthvd`);
  const suggested = await page.getAttribute('#job-command', 'placeholder');
  assert.equal(suggested, 'edtrun -np 2 --hostfile /etc/mpi/hostfile python3 train_mnist.py');
  await page.fill('#job-command', `${suggested} --epochs 1`);
  await page.click('#run-submit');
  await page.waitForURL(/#\/jobs\/\d+$/);
  await waitFor('the job to succeed', async () => (await page.getAttribute('[data-key="Phase"] [data-phase]', 'data-phase')) === 'Succeeded', { timeoutMs: kTrainTimeoutMs });
  const log = await page.textContent('#job-log');
  for (let rank = 0; rank < 2; rank++) assert.match(log, kEpoch(2, rank));
  await screenshot('job-suggested');
});

step('scale to 4 in the console; the banner goes once the 4 are Running', async () => {
  await page.goto(`${edtd.base}/#/clusters/tthvd`);
  await page.fill('#scale-containers', '4');
  await page.click('#scale-submit');
  await page.click('#dialog-confirm');
  await waitAllRunning(page, 4);
  await waitFor('the banner to go', async () => (await page.textContent('.status')) === '');
  await waitFor('a 4-line hostfile', async () => (await page.textContent('#hostfile')).trim().split('\n').length === 4);
  await screenshot('cluster-running-4');
});

step('the terminal again: a 4-line hostfile, and training on 4', async () => {
  await openTerminal();
  assert.equal((await runInTerminal(page, 'cat /etc/mpi/hostfile')).length, 4);
  await train(4);
});

// JupyterLab draws its terminal on a canvas: xterm.js's screen reader mode
// (a JupyterLab setting) puts the text in the page, where it is read.
step("JupyterLab opens from the cluster page; a command typed in its Terminal prints on its screen", async () => {
  await page.goto(`${edtd.base}/#/clusters/tthvd`);
  const [tab] = await Promise.all([page.context().waitForEvent('page'), page.click('#open-jupyter')]);
  jupyter = tab;
  await jupyter.waitForURL(new RegExp(`${kJupyter}lab`), { timeout: 120000 });
  await jupyter.locator('.jp-LauncherCard', { hasText: 'Terminal' }).first().waitFor({ timeout: 60000 });
  const { terminal, screen } = await openJupyterTerminal(jupyter, kJupyter);
  await terminal.locator('.xterm-screen').click();
  await jupyter.keyboard.type('cat /etc/mpi/hostfile; echo "@@$((40+2))"\n');
  const text = await waitFor("the command's output in JupyterLab's terminal", async () => {
    const shown = await screen();
    return /^@@42\s*$/m.test(shown) ? shown : null;
  }, { timeoutMs: 60000 });
  assert.match(text, /tthvd-worker-2 slots=1/);
  await screenshot('jupyter-terminal', jupyter);
  await jupyter.close();
});

step('delete tthvd in the console', async () => {
  await page.goto(`${edtd.base}/#/clusters/tthvd`);
  await page.click('button.danger:text("Delete")');
  await page.click('#dialog-confirm');
  await page.waitForURL(/#\/clusters$/);
  await waitFor('tthvd gone', async () => (await edtd.api('GET', '/clusters/tthvd')).status === 404, { timeoutMs: 60000 });
});

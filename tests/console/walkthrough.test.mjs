// The walkthrough a new user follows, in the console, as a user does it:
// sign in, make a volume and upload the training files into it (the MNIST
// example's script and its dataset folder, Horovod's tensorflow2_mnist.py
// and its runner), create the Horovod cluster tthvd (2 containers, a
// simulated GPU each, 1 GiB of shared memory, the volume), then the seed's
// steps: Open JupyterLab, its Terminal, type `cat /etc/mpi/hostfile` and
// the horovodrun line, and see both ranks train their 5,000 steps' share.
// Then the console's terminal (the tools, the hostfile, training on 2), the
// Jobs panel's suggested command, scale to 4 in the console, train on 4,
// back in JupyterLab's Terminal the horovodrun line with -np 4 (2,500 steps
// per worker), and delete the cluster.
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
// Horovod's example, pinned unmodified, and the runner that gives it MNIST
// offline and runs 1/kStepDivisor of its 10000 // size() steps (README.md, "The scenario `make demo` runs").
const kTfExample = path.join(kSource, 'tests/third_party/horovod/examples/tensorflow2/tensorflow2_mnist.py');
const kTfRunner = path.join(kSource, 'tests/horovod/run_tf2_example.py');
const kStepDivisor = 250;
const kHorovodrun = (np) => `horovodrun -np ${np} --hostfile /etc/mpi/hostfile python run_tf2_example.py --step-divisor ${kStepDivisor} tensorflow2_mnist.py`;
const kShare = (np, rank) => new RegExp(`^\\[${rank}\\]<stdout>: ?run_tf2_example: rank ${rank} on (\\S+): the example's take\\(${10000 / np}\\), run as take\\(${Math.floor(10000 / np / kStepDivisor)}\\)`);
// The synthetic MNIST set the build keeps (the mnist_data fixture), as scripts/demo.py uploads it.
const kData = process.env.EDT_MNIST_DATA;
const kJupyter = '/c/tthvd/jupyter/';
const kEpoch = (np, rank) => new RegExp(`epoch=1 rank=${rank} size=${np} samples=${10000 / np} loss=[\\d.]+ acc=[\\d.]+`);
const kTrainTimeoutMs = 300000;

let edtd;
let browser;
let page;
let jupyter;
let jupyterScreen;
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

// Types `command` in JupyterLab's terminal and returns the lines its
// screen showed until the command ended, between markers the shell
// computes. The screen (its visible rows) is read as it scrolls and each
// reading joined to the lines before where they overlap, so lines that
// scroll away are kept.
async function typeInJupyter(command, { timeoutMs = 60000 } = {}) {
  const tag = Math.floor(Math.random() * 1e6);
  const [begin, end] = [`@@${tag + 1}`, `@@${tag + 2}`];
  let lines = [];
  await jupyter.locator('.jp-Terminal .xterm-screen').first().click();
  await jupyter.keyboard.type(`echo "@@$((${tag}+1))"; ${command}; echo "@@$((${tag}+2))"\n`);
  await waitFor(`"${command}" to finish in JupyterLab's terminal`, async () => {
    const rows = (await jupyterScreen()).split('\n').map((l) => l.trimEnd());
    while (rows.length && rows[rows.length - 1] === '') rows.pop(); // the blank rows below the cursor
    lines = lines.length ? joinScrolled(lines, rows) : rows.slice(rows.indexOf(begin) >= 0 ? rows.indexOf(begin) : rows.length);
    return lines.includes(end);
  }, { timeoutMs, intervalMs: 100 });
  return lines.slice(lines.indexOf(begin) + 1, lines.indexOf(end)).filter((l) => l !== '');
}

// `before` followed by the rows of `screen` after the place where
// `before`'s last lines show on it (all of it if it scrolled past them).
// Its last row may have changed since (a line still being written, the
// prompt): then the place is where the rows before it show.
function joinScrolled(before, screen) {
  for (const kept of [before.length, before.length - 1]) {
    for (let from = Math.max(0, kept - screen.length); from < kept; from++) {
      const tail = before.slice(from, kept);
      for (let at = 0; at + tail.length <= screen.length; at++) {
        if (tail.every((line, i) => screen[at + i] === line)) return before.slice(0, kept).concat(screen.slice(at + tail.length));
      }
    }
  }
  return before.concat(screen);
}

// The seed's run in JupyterLab's terminal: horovodrun on `np` workers; every
// rank says which host it runs on and that it took its 10000 // np share.
async function horovodrun(np) {
  const out = await typeInJupyter(`cd ~/mnist && ${kHorovodrun(np)}`, { timeoutMs: kTrainTimeoutMs });
  const hosts = [];
  for (let rank = 0; rank < np; rank++) {
    const share = out.map((l) => l.match(kShare(np, rank))).find(Boolean);
    assert.ok(share, `rank ${rank}'s share of ${10000 / np} steps in JupyterLab's terminal:\n${out.join('\n')}`);
    hosts.push(share[1]);
  }
  assert.equal(new Set(hosts).size, np, `one worker per container: ${hosts.join(', ')}`);
  assert.ok(out.some((l) => /^\[0\]<stdout>: ?Step #0\s+Loss: [\d.]+/.test(l)), `rank 0's first step line:\n${out.join('\n')}`);
  await screenshot(`jupyter-horovodrun-np${np}`, jupyter);
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
  for (const file of [kTfExample, kTfRunner]) {
    await page.setInputFiles('#upload-file', file);
    await page.click('#upload-submit');
    const name = path.basename(file).replace(/\./g, '\\.');
    await waitFor(`${path.basename(file)} uploaded`, async () => new RegExp(`^Uploaded \\d+ bytes to mnist as ${name}\\.$`).test(await page.textContent('#upload-state')));
  }
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

// JupyterLab draws its terminal on a canvas: xterm.js's screen reader mode
// (a JupyterLab setting) puts the text in the page, where it is read.
step("the seed's steps: Open JupyterLab, Terminal, `cat /etc/mpi/hostfile`, and horovodrun -np 2 on both ranks", async () => {
  await page.goto(`${edtd.base}/#/clusters/tthvd`);
  const [tab] = await Promise.all([page.context().waitForEvent('page'), page.click('#open-jupyter')]);
  jupyter = tab;
  await jupyter.waitForURL(new RegExp(`${kJupyter}lab`), { timeout: 120000 });
  await jupyter.locator('.jp-LauncherCard', { hasText: 'Terminal' }).first().waitFor({ timeout: 60000 });
  ({ screen: jupyterScreen } = await openJupyterTerminal(jupyter, kJupyter));
  assert.deepEqual(await typeInJupyter('cat /etc/mpi/hostfile'), ['tthvd-launcher slots=1', 'tthvd-worker-0 slots=1']);
  await horovodrun(2);
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

step("back in JupyterLab's Terminal: a 4-line hostfile, and horovodrun -np 4 with 2,500 steps per worker", async () => {
  await jupyter.bringToFront();
  const hostfile = await typeInJupyter('cat /etc/mpi/hostfile');
  assert.equal(hostfile.length, 4, hostfile.join('\n'));
  assert.ok(hostfile.includes('tthvd-worker-2 slots=1'), hostfile.join('\n'));
  await horovodrun(4);
  await jupyter.close();
});

step('delete tthvd in the console', async () => {
  await page.goto(`${edtd.base}/#/clusters/tthvd`);
  await page.click('button.danger:text("Delete")');
  await page.click('#dialog-confirm');
  await page.waitForURL(/#\/clusters$/);
  await waitFor('tthvd gone', async () => (await edtd.api('GET', '/clusters/tthvd')).status === 404, { timeoutMs: 60000 });
});

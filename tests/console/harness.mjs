// What the console's end-to-end tests stand on: a real edtd in a fresh data
// directory with simulated GPUs, its API for setting things up, and Debian's
// chromium driven by playwright-core.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { test } from 'node:test';

const env = (name, fallback) => {
  const value = process.env[name] ?? fallback;
  if (!value) throw new Error(`${name} is not set; run these tests through ctest (make test)`);
  return value;
};

export const kChromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function canListen(port) {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

// A port below the kernel's ephemeral range (see tests/harness/ports.py): one the
// kernel hands out could be taken by any connect() before edtd binds it.
async function freePort() {
  const [low] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  for (let tries = 0; tries < 200; tries++) {
    const port = 20000 + Math.floor(Math.random() * (low - 20000));
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port on 127.0.0.1 in 20000-${low - 1}`);
}

export async function waitFor(what, fn, { timeoutMs = 30000, intervalMs = 200 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

// Waits until `selector`'s text is `want`; on timeout the error shows the
// text it held last.
export async function waitForText(page, selector, want, what, options) {
  return waitFor(what, async () => {
    const text = await page.textContent(selector);
    if (text !== want) throw new Error(`${selector} holds ${JSON.stringify(text)}`);
    return true;
  }, options);
}

export class Edtd {
  static async start() {
    const self = new Edtd();
    self.dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'edt-console-e2e-'));
    self.port = await freePort();
    self.base = `http://127.0.0.1:${self.port}`;
    // On edtd's default network, a bridge: one of our own and a block of our
    // own, so a platform test running at the same time does not hand out the
    // same container addresses.
    const bridge = `edtcon${process.pid % 50}`;
    const range = `198.18.${100 + (process.pid % 50)}.0/24`;
    self.logPath = path.join(self.dataDir, 'edtd.log');
    const log = fs.openSync(self.logPath, 'a');
    self.proc = spawn(
      env('EDTD'),
      ['--data-dir', self.dataDir, '--listen', `127.0.0.1:${self.port}`, '--gpus', 'NVIDIA-P4=8', '--network', `bridge:${bridge}`, '--address-range', range, '--grace', '2s', '--web-dir', env('EDT_WEB_DIST')],
      { stdio: ['ignore', log, log] },
    );
    self.exited = new Promise((resolve) => self.proc.on('exit', resolve));
    await waitFor('edtd to answer /healthz', async () => (await fetch(`${self.base}/healthz`)).ok, { timeoutMs: 20000 });
    self.token = fs.readFileSync(path.join(self.dataDir, 'admin.token'), 'utf8').trim();
    return self;
  }

  async api(method, route, body) {
    const res = await fetch(`${this.base}/api/v1${route}`, {
      method,
      headers: { Authorization: `Bearer ${this.token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = text;
    }
    return { status: res.status, json };
  }

  // Deletes every cluster and waits until they are gone, so no container
  // outlives the test; then stops edtd. The data directory stays when
  // keepData is set (a test failed: its log is in there).
  async stop({ keepData = false } = {}) {
    if (!this.proc) return;
    try {
      const { json } = await this.api('GET', '/clusters');
      for (const c of json?.clusters ?? []) await this.api('DELETE', `/clusters/${c.name}`);
      await waitFor('every cluster to be deleted', async () => ((await this.api('GET', '/clusters')).json?.clusters ?? []).length === 0, { timeoutMs: 60000 });
      for (const v of (await this.api('GET', '/volumes')).json?.volumes ?? []) await this.api('DELETE', `/volumes/${v.name}`);
    } finally {
      this.proc.kill('SIGTERM');
      await this.exited;
      this.proc = null;
    }
    // Disks edtd left mounted (a failed test's), as tests/harness/mounts.py does.
    if (!keepData) {
      spawnSync('/usr/bin/python3', ['-c', 'import sys, mounts; mounts.unmount_under(sys.argv[1])', this.dataDir],
        { env: { ...process.env, PYTHONPATH: path.join(path.dirname(new URL(import.meta.url).pathname), '..', '..', 'scripts') } });
      fs.rmSync(this.dataDir, { recursive: true, force: true });
    }
  }

  log() {
    return fs.existsSync(this.logPath) ? fs.readFileSync(this.logPath, 'utf8') : '';
  }

  // Each cluster's containers and events: what a failed step leaves to read
  // (the clusters are deleted when edtd stops).
  async describe() {
    const lines = [];
    const { json } = await this.api('GET', '/clusters');
    for (const { name } of json?.clusters ?? []) {
      const cluster = (await this.api('GET', `/clusters/${name}`)).json;
      lines.push(`cluster ${name}: ${cluster?.status?.phase} ${cluster?.status?.message ?? ''}`);
      for (const c of cluster?.status?.containers ?? []) lines.push(`  ${c.name} ${c.phase} ${c.message}`);
      for (const e of (await this.api('GET', `/clusters/${name}/events`)).json?.events ?? []) lines.push(`  ${e.time} ${e.type} ${e.message}`);
    }
    return lines.join('\n');
  }
}

// The phases the cluster page's containers table shows, by container name.
export async function containerPhases(page) {
  return page.$$eval('#containers-table tbody tr[data-container]', (rows) =>
    Object.fromEntries(rows.map((r) => [r.getAttribute('data-container'), r.querySelector('[data-phase]')?.getAttribute('data-phase')])),
  );
}

// Waits until the cluster page shows `n` containers, all Running.
export async function waitAllRunning(page, n) {
  await waitFor(`${n} containers Running in the page`, async () => {
    const phases = Object.values(await containerPhases(page));
    return phases.length === n && phases.every((p) => p === 'Running');
  }, { timeoutMs: 60000 });
}

// A suite's tests, run in order and building on each other as a user's
// session does. A failure is remembered (`failed`), so that end() prints
// edtd's log and keeps its data; `onFailure(name)` may add more (a screenshot).
export class Steps {
  failed = false;

  constructor(onFailure = async () => {}) {
    this.onFailure = onFailure;
  }

  step = (name, fn) => {
    test(name, async () => {
      try {
        await fn();
      } catch (e) {
        this.failed = true;
        await this.onFailure(name);
        throw e;
      }
    });
  };

  // Stops edtd; after a failure its log is printed and its data kept.
  async end(edtd) {
    if (this.failed) {
      console.error(`edtd's log (${edtd?.logPath}):\n${edtd?.log().slice(-4000)}`);
      console.error(`its clusters:\n${await edtd?.describe().catch((e) => `(not read: ${e})`)}`);
    }
    await edtd?.stop({ keepData: this.failed });
  }
}

export async function launchBrowser() {
  const require = createRequire(path.join(env('EDT_WEB_SOURCE'), 'package.json'));
  const { chromium } = require('playwright-core');
  // playwright-core starts chromium with a fresh temporary profile
  // (--user-data-dir) of its own and removes it on close.
  return chromium.launch({ executablePath: env('EDT_CHROMIUM', '/usr/bin/chromium'), args: kChromiumArgs, headless: true });
}

export function outputDir() {
  const dir = env('EDT_TEST_OUT');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

// The console's terminal (#terminal), read back: the text its buffer holds,
// line by line (what the shell wrote, apart from how it is drawn).
export async function terminalBuffer(page) {
  return page.$eval('#terminal', (el) => el.bufferLines().map((l) => l.trimEnd()));
}

// Runs a command in the console's open terminal and returns the lines it
// printed, between markers the shell computes (so the echoed command never
// matches). The lines are the buffer's, and the screen (its drawn rows)
// must show the last of them too.
export async function runInTerminal(page, command, { timeoutMs = 20000 } = {}) {
  const tag = Math.floor(Math.random() * 1e6);
  await page.locator('#terminal .xterm').click();
  await page.keyboard.type(`echo "@@$((${tag}+1))"; ${command}; echo "@@$((${tag}+2))"\n`);
  const lines = await waitFor(`"${command}" to finish in the terminal`, async () => {
    const buffer = await terminalBuffer(page);
    return buffer.includes(`@@${tag + 2}`) ? buffer : null;
  }, { timeoutMs });
  const out = lines.slice(lines.lastIndexOf(`@@${tag + 1}`) + 1, lines.lastIndexOf(`@@${tag + 2}`)).filter((l) => l !== '');
  await waitFor('the end marker on the screen', async () => (await page.locator('#terminal .xterm-rows').innerText()).includes(`@@${tag + 2}`));
  return out;
}

// Where each '_' of `text` is drawn on the terminal's screen: the cell of
// the character (its x span, and its row's y span, in CSS pixels), for the
// first row that shows `text`, and the terminal's background colour.
async function underscoreCells(page, text) {
  return page.$eval('#terminal', (el, text) => {
    const row = [...el.querySelectorAll('.xterm-rows > div')].find((r) => r.textContent.includes(text));
    if (!row) return null;
    const nodes = [];
    const walker = document.createTreeWalker(row, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) nodes.push(n);
    const start = nodes.map((n) => n.data).join('').indexOf(text);
    const rowBox = row.getBoundingClientRect();
    const cells = [];
    for (let i = 0; i < text.length; i++) {
      if (text[i] !== '_') continue;
      let at = start + i;
      const node = nodes.find((n) => (at < n.data.length ? true : ((at -= n.data.length), false)));
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + 1);
      const box = range.getBoundingClientRect();
      cells.push({ x: box.left, width: box.width, y: rowBox.top, height: rowBox.height });
    }
    const background = getComputedStyle(el.querySelector('.xterm-viewport')).backgroundColor;
    return { cells, background };
  }, text);
}

// The underscores of `text` as a screenshot shows them (no OCR): for each,
// how many pixels of its cell differ from the terminal's background, and
// how many of those lie in the lower half of the cell. An underscore drawn
// outside its row's cell (clipped away) has none.
export async function underscoreInk(page, text) {
  const found = await underscoreCells(page, text);
  if (!found) throw new Error(`no row of the terminal shows ${JSON.stringify(text)}`);
  const png = (await page.screenshot()).toString('base64');
  return page.evaluate(async ({ png, cells, background }) => {
    const image = new Image();
    image.src = `data:image/png;base64,${png}`;
    await image.decode();
    const canvas = document.createElement('canvas');
    canvas.width = image.width;
    canvas.height = image.height;
    const g = canvas.getContext('2d');
    g.drawImage(image, 0, 0);
    const bg = background.match(/\d+/g).map(Number);
    const scale = image.width / window.innerWidth;
    return cells.map((c) => {
      const [x0, y0] = [Math.ceil(c.x * scale), Math.ceil(c.y * scale)];
      const [x1, y1] = [Math.floor((c.x + c.width) * scale), Math.floor((c.y + c.height) * scale)];
      const { data } = g.getImageData(x0, y0, x1 - x0, y1 - y0);
      let ink = 0;
      let low = 0;
      for (let p = 0; p < data.length; p += 4) {
        if (Math.abs(data[p] - bg[0]) + Math.abs(data[p + 1] - bg[1]) + Math.abs(data[p + 2] - bg[2]) < 120) continue;
        ink += 1;
        if (Math.floor(p / 4 / (x1 - x0)) >= (y1 - y0) / 2) low += 1;
      }
      return { ink, low, width: x1 - x0, height: y1 - y0 };
    });
  }, { png, ...found });
}

// JupyterLab draws its terminals on a canvas, so their text is not in the
// page; xterm.js's screen reader mode, a JupyterLab setting, keeps the rows
// as text too. Sets it for JupyterLab at `base` (a path on edtd) from the tab
// `jupyter`; the tab reads it when it next loads.
export async function setJupyterTerminalText(jupyter, base) {
  const set = await jupyter.evaluate(async (url) => {
    const res = await fetch(url, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ raw: '{"screenReaderMode": true}' }) });
    return { status: res.status, text: await res.text() };
  }, `${base}lab/api/settings/@jupyterlab/terminal-extension:plugin`);
  if (set.status !== 204) throw new Error(`JupyterLab refused the terminal's setting: ${set.status} ${set.text}`);
}

// The first JupyterLab Terminal in the tab `jupyter` and a reader of its
// screen's text, once the shell's prompt shows.
export async function jupyterTerminal(jupyter) {
  const terminal = jupyter.locator('.jp-Terminal').first();
  await terminal.locator('.xterm-screen').waitFor({ timeout: 60000 });
  const screen = () => terminal.locator('.xterm-accessibility-tree').innerText();
  await waitFor("the shell's prompt in JupyterLab's terminal", async () => /root@\S+:/.test(await screen()), { timeoutMs: 60000 });
  return { terminal, screen };
}

// A JupyterLab Terminal opened as a user does, from the launcher's Terminal
// card, with its text readable (setJupyterTerminalText).
export async function openJupyterTerminal(jupyter, base) {
  await setJupyterTerminalText(jupyter, base);
  await jupyter.reload();
  const card = jupyter.locator('.jp-LauncherCard', { hasText: 'Terminal' }).first();
  await card.waitFor({ timeout: 60000 });
  await card.click();
  return jupyterTerminal(jupyter);
}

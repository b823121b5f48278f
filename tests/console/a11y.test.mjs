// The console's accessibility and habits in a real browser against a real
// edtd: axe-core on every view (no serious or critical violation), the main
// actions with the keyboard only, a visible focus, phases carried by text,
// 1280x720 and phone-sized windows, deep links that survive a reload and open
// in a fresh tab, and a scale that shows each new container's phase as it
// changes. The tests run in order and build on each other.
// Each saves a screenshot under EDT_TEST_OUT (names start with a11y-).
import assert from 'node:assert/strict';
import path from 'node:path';
import { createRequire } from 'node:module';
import { after, before } from 'node:test';
import { containerPhases as phasesIn, Edtd, launchBrowser, outputDir, Steps, waitAllRunning as allRunningIn, waitFor } from './harness.mjs';

const containerPhases = (target = page) => phasesIn(target);
const waitAllRunning = (n, target = page) => allRunningIn(target, n);

const kViewport = { width: 1280, height: 720 };
const kPhone = { width: 390, height: 844 };
const kAxePath = createRequire(path.join(process.env.EDT_WEB_SOURCE ?? '', 'package.json')).resolve('axe-core/axe.min.js');

let edtd;
let browser;
let page;
const pageErrors = [];
const checked = [];
const minor = new Set();

const steps = new Steps();
const step = steps.step;

async function screenshot(name, target = page, { fullPage = true } = {}) {
  const file = path.join(outputDir(), `a11y-${name}.png`);
  await target.screenshot({ path: file, fullPage });
  return file;
}

async function openApp(target, hash) {
  await target.goto(`${edtd.base}/${hash}`);
}

// Runs axe-core (from web/node_modules, no network) on the page as it is and
// fails on a serious or critical violation, naming the rule, the elements and
// the help text.
async function axe(name, target = page) {
  if (!(await target.evaluate(() => typeof window.axe === 'object'))) await target.addScriptTag({ path: kAxePath });
  const result = await target.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  for (const v of result.violations.filter((x) => !bad.includes(x))) minor.add(`${v.id} (${v.impact}) in ${name}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  const report = bad.map((v) => `  ${v.id} (${v.impact}): ${v.help}\n    ${v.helpUrl}\n${v.nodes.map((n) => `    at ${n.target.join(' ')}: ${n.failureSummary?.split('\n').slice(1).join(' ')}`).join('\n')}`);
  assert.equal(bad.length, 0, `axe-core finds ${bad.length} serious/critical violation(s) in ${name}:\n${report.join('\n')}`);
  checked.push(name);
}

// Each phase badge says its phase in words, not only in a colour.
async function assertPhasesInText(target = page) {
  const badges = await target.$$eval('[data-phase]', (els) => els.map((e) => [e.getAttribute('data-phase'), e.textContent.trim()]));
  assert.ok(badges.length > 0, 'the page shows phases');
  for (const [phase, text] of badges) assert.equal(text, phase, `the ${phase} badge carries its phase as text`);
}

const activeInfo = (target = page) =>
  target.evaluate(() => {
    const el = document.activeElement;
    return { id: el?.id ?? '', tag: el?.tagName ?? '', href: el?.getAttribute('href') ?? '', text: el?.textContent?.trim() ?? '', inDialog: Boolean(el?.closest('dialog')) };
  });

// Presses Tab (or Shift+Tab) until the focused element matches, at most
// `limit` times: the element is reachable with the keyboard.
async function tabTo(what, matches, { back = false, limit = 60, target = page } = {}) {
  for (let i = 0; i < limit; i += 1) {
    await target.keyboard.press(back ? 'Shift+Tab' : 'Tab');
    const info = await activeInfo(target);
    if (matches(info)) return info;
  }
  throw new Error(`${limit} presses of ${back ? 'Shift+Tab' : 'Tab'} did not reach ${what}`);
}

// The focused element draws a focus ring: an outline or a box-shadow (on
// the element that shows it, when the control itself is transparent as the
// segmented buttons' radios are).
async function assertFocusVisible(what, target = page) {
  const style = await target.evaluate(() => {
    const el = document.activeElement;
    const shown = getComputedStyle(el).opacity === '0' && el.nextElementSibling ? el.nextElementSibling : el;
    const s = getComputedStyle(shown);
    return { visible: el.matches(':focus-visible'), outline: s.outlineStyle, width: parseFloat(s.outlineWidth), shadow: s.boxShadow };
  });
  assert.ok(style.visible, `${what} matches :focus-visible after a key press`);
  assert.ok((style.outline !== 'none' && style.width > 0) || style.shadow !== 'none', `${what} shows its focus: ${JSON.stringify(style)}`);
}

before(async () => {
  edtd = await Edtd.start();
  assert.equal((await edtd.api('POST', '/volumes', { name: 'data' })).status, 201);
  browser = await launchBrowser();
  // A context of its own, so a second tab shares the page's signed-in state.
  const context = await browser.newContext({ viewport: kViewport, colorScheme: 'light' });
  page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
});

after(async () => {
  if (checked.length) console.log(`axe-core found no serious or critical violation in: ${checked.join(', ')}`);
  if (minor.size) console.log(`axe-core's moderate and minor findings (reported, not failed):\n  ${[...minor].join('\n  ')}`);
  await browser?.close();
  await steps.end(edtd);
});

step('sign in with the keyboard only; the sign-in page (with its error) passes axe', async () => {
  await openApp(page, '');
  await page.waitForURL(/#\/signin$/);
  await axe('sign-in');
  assert.equal((await activeInfo()).id, 'token', 'the focus starts in the token field');
  await page.keyboard.type('not-a-token');
  await page.keyboard.press('Enter');
  await waitFor('the token error', async () => (await page.textContent('#token-error')).includes('does not know this token'));
  await axe('sign-in with its error');
  await page.fill('#token', '');
  await page.keyboard.type(edtd.token);
  await tabTo('Sign in', (a) => a.tag === 'BUTTON' && a.text === 'Sign in');
  await assertFocusVisible('the Sign in button');
  await page.keyboard.press('Enter');
  await page.waitForURL(/#\/clusters$/);
  await page.waitForSelector('#clusters td.empty');
  await axe('clusters list (empty)');
});

step('keyboard only: open the create form, submit it with an error, fix it, submit; the form passes axe', async () => {
  await page.locator('body').focus();
  await tabTo('Create', (a) => a.id === 'create');
  await assertFocusVisible('the Create link');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#create-form');
  await waitFor('the focus in Name', async () => (await page.evaluate(() => document.activeElement?.getAttribute('data-field'))) === 'name');
  await axe('create form');
  await page.keyboard.type('Not Valid');
  await page.keyboard.press('Enter');
  await waitFor('the name error', async () => /DNS label/.test(await page.textContent('[data-error-for="name"]')));
  await axe('create form with its errors');
  await screenshot('create-errors');
  await page.keyboard.press('Control+A');
  await page.keyboard.type('kb');
  await tabTo('the Create button', (a) => a.id === 'create-submit');
  await assertFocusVisible('the create button');
  await page.keyboard.press('Space');
  await page.waitForURL(/#\/clusters\/kb$/);
  await waitAllRunning(2);
  await assertPhasesInText();
  await axe('cluster page at 2 containers');
});

step('keyboard only: the list opens a cluster; a dialog takes the focus, Escape closes it and the focus returns', async () => {
  await openApp(page, '#/clusters');
  await page.waitForSelector('#clusters tr[data-cluster="kb"]');
  await assertPhasesInText();
  await axe('clusters list');
  await page.locator('body').focus();
  await tabTo('the link to kb', (a) => a.href === '#/clusters/kb');
  await assertFocusVisible('the link to kb');
  await page.keyboard.press('Enter');
  await page.waitForURL(/#\/clusters\/kb$/);
  await page.waitForSelector('#containers-table tr[data-container]');

  await page.locator('body').focus();
  const opener = await tabTo('Delete', (a) => a.tag === 'BUTTON' && a.text === 'Delete');
  await page.keyboard.press('Enter');
  await page.waitForSelector('dialog[open]');
  assert.equal((await activeInfo()).inDialog, true, 'the focus is in the dialog');
  await assertFocusVisible('the dialog button');
  await axe('confirmation dialog');
  await page.keyboard.press('Escape');
  await waitFor('the dialog to close', async () => (await page.locator('dialog').count()) === 0);
  const back = await activeInfo();
  assert.equal(back.text, opener.text, 'the focus returns to the button that opened the dialog');
  assert.equal(back.tag, 'BUTTON');
  assert.equal((await edtd.api('GET', '/clusters/kb')).status, 200, 'Escape cancelled the delete');
});

// The phases every container of the page showed, in order, recorded in the
// page itself at each change of the table, so no render is missed.
async function recordPhases() {
  await page.evaluate(() => {
    window.seenPhases = {};
    window.announced = [];
    const note = () => {
      document.querySelectorAll('#containers-table tbody tr[data-container]').forEach((r) => {
        const name = r.getAttribute('data-container');
        const phase = r.querySelector('[data-phase]')?.getAttribute('data-phase');
        const seen = (window.seenPhases[name] ??= []);
        if (phase && seen[seen.length - 1] !== phase) seen.push(phase);
      });
      const live = document.querySelector('#containers-live')?.textContent;
      if (live && window.announced[window.announced.length - 1] !== live) window.announced.push(live);
    };
    new MutationObserver(note).observe(document.querySelector('main'), { subtree: true, childList: true, characterData: true, attributes: true });
    note();
  });
}

step('scale 2 -> 4 with the keyboard: each new container shows its phases as they change, announced in a live region', async () => {
  await openApp(page, '#/clusters/kb');
  await waitAllRunning(2);
  assert.equal(await page.getAttribute('#containers-live', 'aria-live'), 'polite');
  await recordPhases();
  await page.focus('#scale-containers');
  await page.keyboard.press('Control+A');
  await page.keyboard.type('4');
  await page.keyboard.press('Enter');
  await page.waitForSelector('dialog[open]');
  assert.equal((await activeInfo()).id, 'dialog-confirm', 'the focus is on the dialog\u2019s confirm button');
  await page.keyboard.press('Enter');
  // A picture of the scale under way (whatever phase the new containers are in by then).
  await page.waitForFunction(() => document.querySelectorAll('#containers-table tbody tr[data-container]').length === 4);
  await screenshot('scale-progress');
  await waitAllRunning(4);
  const seen = await page.evaluate(() => window.seenPhases);
  for (const name of ['kb-worker-1', 'kb-worker-2']) {
    const phases = seen[name] ?? [];
    assert.equal(phases[phases.length - 1], 'Running', `${name} ends Running: ${phases.join(' -> ')}`);
    assert.ok(phases.length >= 2 && phases.slice(0, -1).every((p) => p !== 'Running'), `${name} showed a phase before Running: ${phases.join(' -> ')}`);
  }
  const announced = await page.evaluate(() => window.announced);
  console.log(`phases seen: ${JSON.stringify(seen)}; announced: ${JSON.stringify(announced)}`);
  assert.ok(announced.some((a) => /kb-worker-[12] is (Pending|Creating)/.test(a)), `a new container's early phase is announced: ${announced.join(' | ')}`);
  assert.ok(announced.some((a) => /kb-worker-[12] is Running/.test(a)), `a new container's Running is announced: ${announced.join(' | ')}`);
  await assertPhasesInText();
  await axe('cluster page at 4 containers');
  await screenshot('cluster-4-1280x720');
});

step('the terminal (which Escape, Tab leaves), a job and its log pass axe; the cluster page and the log survive a reload and open in a fresh tab', async () => {
  await openApp(page, '#/clusters/kb/terminal/kb-launcher');
  await waitFor('the terminal to connect', async () => (await page.textContent('#terminal-state')) === 'Connected');
  await axe('terminal');
  // The shell keeps Tab; Escape first lets Shift+Tab (or Tab) leave it.
  await waitFor('the focus in the terminal', () => page.evaluate(() => document.activeElement?.classList.contains('xterm-helper-textarea')));
  await page.keyboard.press('Shift+Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.classList.contains('xterm-helper-textarea')), true, 'Tab alone stays in the shell');
  await page.keyboard.press('Escape');
  await page.keyboard.press('Shift+Tab');
  assert.equal(await page.evaluate(() => Boolean(document.activeElement?.closest('#terminal'))), false, 'Escape, then Shift+Tab leaves the terminal');
  await assertFocusVisible('the control before the terminal');

  const job = await edtd.api('POST', '/clusters/kb/jobs', { command: "echo 'epoch=1 loss=0.5'; echo 'epoch=2 loss=0.25'" });
  assert.equal(job.status, 201, JSON.stringify(job.json));
  const jobHash = `#/jobs/${job.json.id}`;
  const logShown = async (target) => (await target.textContent('#job-log')).includes('epoch=2 loss=0.25') && (await target.getAttribute('[data-key="Phase"] [data-phase]', 'data-phase')) === 'Succeeded';
  await openApp(page, jobHash);
  await waitFor("the job's log", () => logShown(page));
  await assertPhasesInText();
  await axe("a job's log");
  await page.reload();
  await waitFor("the job's log after a reload", () => logShown(page));
  assert.ok(page.url().endsWith(jobHash), `still ${jobHash}: ${page.url()}`);

  await openApp(page, '#/clusters/kb');
  await waitAllRunning(4);
  await page.reload();
  await waitAllRunning(4);
  assert.ok(page.url().endsWith('#/clusters/kb'));
  assert.equal(await page.textContent('h1'), 'kb');

  // A fresh tab of the same browser profile (the token is kept there) opens the links directly.
  for (const [hash, ready] of [
    ['#/clusters/kb', (p) => waitAllRunning(4, p)],
    [jobHash, (p) => waitFor("the job's log in a fresh tab", () => logShown(p))],
  ]) {
    const tab = await page.context().newPage();
    await tab.goto(`${edtd.base}/${hash}`);
    await ready(tab);
    assert.ok(tab.url().endsWith(hash), `the fresh tab stays on ${hash}: ${tab.url()}`);
    await tab.close();
  }
});

step('GPUs, volumes (with an upload), users and tokens, images pass axe', async () => {
  await openApp(page, '#/gpus');
  await page.waitForSelector('#gpus-table tr[data-gpu]');
  await axe('GPUs');

  await openApp(page, '#/volumes');
  await waitFor('data in the upload form', async () => (await page.locator('#upload-volume option[value="data"]').count()) === 1);
  await axe('volumes');
  await page.selectOption('#upload-volume', 'data');
  await page.setInputFiles('#upload-file', { name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from('hello\n') });
  await page.fill('#upload-path', '../escape.txt');
  await page.click('#upload-submit');
  await waitFor('the refusal next to the path', async () => /has a '\.\.' segment/.test(await page.textContent('#upload-path-error')));
  await axe('volume upload with its error');
  await page.fill('#upload-path', 'hello.txt');
  await page.click('#upload-submit');
  await waitFor('the upload to finish', async () => /^Uploaded 6 bytes/.test(await page.textContent('#upload-state')));
  await axe('volume upload done');

  await openApp(page, '#/users');
  await page.waitForSelector('#users-table tr[data-user="admin"]');
  await page.fill('#user-name', 'bob');
  await page.click('#user-create');
  await page.waitForSelector('#new-token');
  await axe('users with a new token shown');
  await openApp(page, '#/users/bob');
  await page.waitForSelector('#tokens-table tr[data-token]');
  await axe('tokens of a user');

  await openApp(page, '#/images');
  await page.waitForSelector('#images-table tr[data-image="edt"]');
  await page.click('#image-create');
  await waitFor('the image form errors', async () => (await page.textContent('#image-frameworks-error')) !== '');
  await axe('images with form errors');
});

const kMainViews = [
  ['#/clusters', '#clusters tr[data-cluster="kb"]', 'clusters'],
  ['#/clusters/kb', '#containers-table tr[data-container]', 'cluster'],
  ['#/create', '#create-form', 'create'],
  ['#/jobs/1', '#job-log', 'job'],
  ['#/volumes', '#volumes-table tr[data-volume="data"]', 'volumes'],
  ['#/users', '#users-table tr[data-user="admin"]', 'users'],
  ['#/images', '#images-table tr[data-image="edt"]', 'images'],
  ['#/gpus', '#gpus-table tr[data-gpu]', 'gpus'],
];

// Tabs through every stop of the page from the first (the skip link),
// forwards until the focus leaves the document, then back two stops with
// Shift+Tab: each stop shows its focus.
async function tabThrough(what, target) {
  await target.focus('a.skip');
  const stops = [];
  for (let i = 0; i < 150; i += 1) {
    if (i > 0) await target.keyboard.press('Tab');
    const info = await activeInfo(target);
    if (info.tag === 'BODY') break;
    await assertFocusVisible(`${info.tag.toLowerCase()}#${info.id} "${info.text.slice(0, 30)}" (stop ${stops.length + 1} in ${what})`, target);
    stops.push(info);
  }
  assert.equal((await activeInfo(target)).tag, 'BODY', `${what}: Tab leaves the page after the last stop`);
  assert.ok(stops.length >= 8, `${what}: Tab reaches the header and the view (${stops.length} stops: ${stops.map((x) => x.id || x.href || x.text.slice(0, 20) || x.tag).join(', ')})`);
  // A stop's text may hold a time that ticks meanwhile (a job's age): digits aside.
  const same = (info) => ({ ...info, text: info.text.replace(/[0-9]+/g, '#') });
  for (const back of [1, 2]) {
    await target.keyboard.press('Shift+Tab');
    assert.deepEqual(same(await activeInfo(target)), same(stops[stops.length - back]), `${what}: Shift+Tab goes back to stop ${stops.length - back + 1}`);
  }
}

// A table wider than the window scrolls inside a container of its own.
async function tablesScrollInside(target) {
  return target.$$eval('table', (tables) =>
    tables
      .filter((t) => t.getBoundingClientRect().width > window.innerWidth)
      .filter((t) => !['auto', 'scroll'].includes(getComputedStyle(t.parentElement).overflowX))
      .map((t) => t.id || t.className),
  );
}

for (const [size, viewport, scheme] of [
  ['1280x720', kViewport, 'light'],
  ['390x844', kPhone, 'dark'],
]) {
  step(`a ${size} window (${scheme}): no page scrolls sideways, the navigation is reachable, every view passes axe`, async () => {
    const target = await browser.newPage({ viewport, colorScheme: scheme });
    target.on('pageerror', (e) => pageErrors.push(e.message));
    await target.addInitScript((token) => localStorage.setItem('edt.token', token), edtd.token);
    try {
      for (const [hash, ready, name] of kMainViews) {
        await openApp(target, hash);
        await target.waitForSelector(ready);
        const overflow = await target.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 0, `${hash} at ${size} is ${overflow}px wider than the window`);
        assert.deepEqual(await tablesScrollInside(target), [], `${hash} at ${size}: a wide table scrolls inside its own box`);
        await axe(`${name} at ${size} (${scheme})`, target);
        await screenshot(`${name}-${size}`, target, { fullPage: false });
        await tabThrough(`${name} at ${size}`, target);
      }
      // The navigation wraps instead of hiding behind a menu: every link is
      // on screen, and the keyboard reaches and follows it.
      await openApp(target, '#/clusters');
      await target.waitForSelector('#clusters tr[data-cluster="kb"]');
      for (const link of await target.locator('nav.main-nav a').all()) {
        const box = await link.boundingBox();
        assert.ok(box && box.x >= 0 && box.x + box.width <= viewport.width, `${await link.textContent()} is on screen at ${size}: ${JSON.stringify(box)}`);
      }
      await target.locator('body').focus();
      await tabTo('Volumes in the navigation', (a) => a.id === 'nav-volumes', { target });
      await assertFocusVisible('Volumes in the navigation', target);
      await screenshot(`nav-${size}`, target, { fullPage: false });
      await target.keyboard.press('Enter');
      await target.waitForURL(/#\/volumes$/);
    } finally {
      await target.close();
    }
  });
}

step('no uncaught errors in the pages', async () => {
  assert.deepEqual(pageErrors, []);
});

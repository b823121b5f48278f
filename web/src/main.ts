// The console's shell: header, theme, and a hash router (#/clusters,
// #/clusters/NAME, ...) so every page has a URL that works when reloaded.

import './style.css';
import { Api } from './api';
import { type Context, type View, describe, storeToken, storedToken } from './app';
import { h, replace } from './dom';
import { signInView } from './views/signin';
import { clustersView } from './views/clusters';
import { createView } from './views/create';
import { detailView } from './views/detail';
import { jobView } from './views/job';
import { terminalView } from './views/terminal';
import { volumesView } from './views/volumes';
import { filesView } from './views/files';
import { tokensView, usersView } from './views/users';
import { imagesView } from './views/images';
import { gpusView } from './views/gpus';
import { teamsView } from './views/teams';

interface Route {
  pattern: RegExp;
  keys: string[];
  view: View;
  title: string;
  public?: boolean;
}

const kRoutes: Route[] = [
  { pattern: /^\/signin$/, keys: [], view: signInView, title: 'Sign in', public: true },
  { pattern: /^\/clusters$/, keys: [], view: clustersView, title: 'Distributed training clusters' },
  { pattern: /^\/create$/, keys: [], view: createView, title: 'Create a cluster' },
  { pattern: /^\/clusters\/([^/]+)$/, keys: ['name'], view: detailView, title: 'Cluster' },
  { pattern: /^\/clusters\/([^/]+)\/terminal\/([^/]+)$/, keys: ['name', 'container'], view: terminalView, title: 'Terminal' },
  { pattern: /^\/jobs\/([^/]+)$/, keys: ['id'], view: jobView, title: 'Job' },
  { pattern: /^\/volumes$/, keys: [], view: volumesView, title: 'Volumes' },
  { pattern: /^\/volumes\/([^/]+)\/files$/, keys: ['name'], view: filesView, title: 'Files' },
  { pattern: /^\/volumes\/([^/]+)\/files\/([^/]+)$/, keys: ['name', 'path'], view: filesView, title: 'Files' },
  { pattern: /^\/users$/, keys: [], view: usersView, title: 'Users and tokens' },
  { pattern: /^\/users\/([^/]+)$/, keys: ['name'], view: tokensView, title: 'Tokens' },
  { pattern: /^\/images$/, keys: [], view: imagesView, title: 'Images' },
  { pattern: /^\/gpus$/, keys: [], view: gpusView, title: 'GPUs' },
  { pattern: /^\/teams$/, keys: [], view: teamsView, title: 'Teams and quotas' },
];

type Theme = 'auto' | 'light' | 'dark';
const kThemeKey = 'edt.theme';

function applyTheme(theme: Theme): void {
  if (theme === 'auto') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
}

// The view on screen. A view may load data before it renders, so one the
// user has already left (a second hash change right after the first) can
// finish after the next view started: it renders into a detached element,
// and its polls and messages stop when it is left, whenever it made them.
interface Shown {
  left: boolean;
  leaveHandlers: (() => void)[];
}

let shown: Shown = { left: false, leaveHandlers: [] };

function leave(): void {
  shown.left = true;
  shown.leaveHandlers.forEach((fn) => fn());
  shown.leaveHandlers = [];
}

// Why the last page went to sign-in, said there (once), so a click that
// lands on sign-in instead of its page is never without a word.
let signInReason = '';

function toSignIn(reason: string): void {
  signInReason = reason;
  if (!location.hash.startsWith('#/signin')) location.hash = '#/signin';
  else ctx.notify(reason);
}

const api = new Api({
  token: storedToken,
  onUnauthorized: () => {
    storeToken(null);
    renderAccount();
    toSignIn('edtd no longer accepts your token (it was revoked or expired): sign in again.');
  },
});

const main = h('main', { id: 'main', tabindex: '-1' });
const status = h('p', { class: 'status', role: 'status', 'aria-live': 'polite' });
const account = h('div', { class: 'account' });

function renderAccount(): void {
  const themeSelect = h(
    'select',
    {
      'aria-label': 'Theme',
      onchange: (e: Event) => {
        const theme = (e.target as HTMLSelectElement).value as Theme;
        localStorage.setItem(kThemeKey, theme);
        applyTheme(theme);
      },
    },
    (['auto', 'light', 'dark'] as Theme[]).map((t) => h('option', { value: t, selected: (localStorage.getItem(kThemeKey) ?? 'auto') === t }, `Theme: ${t}`)),
  );
  const who = h('span', { class: 'muted', id: 'who', title: 'Signed in as' });
  replace(
    account,
    themeSelect,
    storedToken() ? [who, h('button', { type: 'button', class: 'secondary', id: 'sign-out', onclick: () => ctx.signOut() }, 'Sign out')] : null,
  );
  if (storedToken()) {
    api.whoami().then(
      (user) => (who.textContent = user.admin && user.name !== 'admin' ? `${user.name} (admin)` : user.name),
      () => undefined,
    );
  }
}

// What the shell and every view share; viewContext adds the view's own part.
const ctx: Omit<Context, 'poll' | 'onLeave'> = {
  api,
  navigate: (hash) => {
    location.hash = hash;
  },
  signedIn: () => storedToken() !== null,
  setToken: (token) => {
    storeToken(token);
    renderAccount();
  },
  signOut: () => {
    storeToken(null);
    renderAccount();
    location.hash = '#/signin';
  },
  notify: (message, kind = 'info') => {
    status.textContent = message;
    status.dataset.kind = kind;
    delete status.dataset.source;
    status.setAttribute('role', kind === 'error' ? 'alert' : 'status');
  },
};

// What a view gets: ctx, with polls, cleanups and messages tied to `view`.
function viewContext(view: Shown): Context {
  const onLeave = (fn: () => void) => {
    if (view.left) fn();
    else view.leaveHandlers.push(fn);
  };
  const notify: Context['notify'] = (message, kind) => {
    if (!view.left) ctx.notify(message, kind);
  };
  return {
    ...ctx,
    onLeave,
    notify,
    poll: (fn, periodMs) => {
      let stopped = false;
      let timer = 0;
      const tick = async () => {
        try {
          await fn();
          if (status.dataset.kind === 'error' && status.dataset.source === 'poll') notify('');
        } catch (e) {
          if (!stopped && !view.left) {
            notify(describe(e), 'error');
            status.dataset.source = 'poll';
          }
        }
        if (!stopped) timer = window.setTimeout(tick, typeof periodMs === 'function' ? periodMs() : periodMs);
      };
      onLeave(() => {
        stopped = true;
        window.clearTimeout(timer);
      });
      if (!stopped) void tick();
    },
  };
}

async function route(): Promise<void> {
  leave();
  const view: Shown = { left: false, leaveHandlers: [] };
  shown = view;
  ctx.notify('');
  const path = location.hash.replace(/^#/, '') || '/clusters';
  const match = kRoutes.map((r) => ({ r, m: r.pattern.exec(path) })).find((x) => x.m);
  if (!match) {
    location.hash = '#/clusters';
    return;
  }
  if (!match.r.public && !ctx.signedIn()) {
    toSignIn(`You are signed out: sign in to see ${match.r.title.toLowerCase()}.`);
    return;
  }
  if (match.r.public && signInReason) {
    ctx.notify(signInReason);
    signInReason = '';
  }
  const params: Record<string, string> = {};
  match.r.keys.forEach((k, i) => (params[k] = decodeURIComponent(match.m![i + 1])));
  document.title = `${params['name'] ?? params['id'] ?? match.r.title} · edt console`;
  const root = h('div', {});
  main.replaceChildren(root);
  main.dataset.view = path.split('/')[1];
  document.querySelectorAll('nav.main-nav a').forEach((a) => {
    if (a.getAttribute('href') === `#/${main.dataset.view}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  });
  const viewCtx = viewContext(view);
  try {
    await match.r.view(viewCtx, root, params);
  } catch (e) {
    viewCtx.notify(describe(e), 'error');
  }
}

function start(): void {
  applyTheme((localStorage.getItem(kThemeKey) as Theme) ?? 'auto');
  const header = h(
    'header',
    { class: 'top' },
    h('a', { class: 'skip', href: '#main', onclick: (e: Event) => { e.preventDefault(); main.focus(); } }, 'Skip to content'),
    h('a', { class: 'brand', href: '#/clusters' }, h('span', { class: 'logo', 'aria-hidden': 'true' }, '◆'), ' edt console'),
    h(
      'nav',
      { 'aria-label': 'Main', class: 'main-nav' },
      [
        ['#/clusters', 'Distributed training clusters'],
        ['#/volumes', 'Volumes'],
        ['#/images', 'Images'],
        ['#/gpus', 'GPUs'],
        ['#/teams', 'Teams'],
        ['#/users', 'Users and tokens'],
      ].map(([href, text]) => h('a', { href, id: `nav-${href.slice(2)}` }, text)),
    ),
    account,
  );
  renderAccount();
  document.body.replaceChildren(header, status, main);
  window.addEventListener('hashchange', () => void route());
  void route();
}

start();

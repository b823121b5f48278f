// Pulls from a registry (docs/images.md, "In edtd: pulls from a registry"):
// the admin's form, and the pulls under way with how far each has come,
// which every user sees while the Images view is open. The form checks the
// reference only for what is plainly wrong; edtd reads it and judges, and
// its refusal is shown next to the field it names.

import type { Framework, Image, ImagePulled, ImagePullProgress } from '../api';
import type { Context } from '../app';
import type { ImagePullRequest } from '../generated/api';
import { h, phaseBadge, replace } from '../dom';
import { checkResourceName } from '../platform';
import { type Field, clearErrors, field, frameworkChecks, showError } from './fields';

// How often GET /images/pulls is asked: while a pull is listed or this
// console started one, and otherwise.
export const kBusyPollMs = 1000;
export const kIdlePollMs = 5000;

export function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}

// A reference as edtd reads one, Docker's way: the first name is the
// registry when it has a '.' or a ':' or is localhost (else Docker Hub,
// where "ubuntu" is library/ubuntu); no tag and no digest is :latest.
export interface Reference {
  repository: string;
  tag: string;
  digest: string;
}

// The reference, or what is wrong with it. No message repeats the text: a
// reference may carry a user:password@.
export function parseReference(text: string): Reference | string {
  const form = 'write it as REGISTRY/REPOSITORY:TAG, e.g. nvcr.io/nvidia/pytorch:24.05-py3';
  if (text === '') return "Enter the image's reference, e.g. nvcr.io/nvidia/pytorch:24.05-py3, or ubuntu:24.04 from Docker Hub.";
  if (text.length > 512) return `The reference has ${text.length} characters; at most 512 are allowed.`;
  if (/\s/.test(text)) return `The reference has a space in it; ${form}.`;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return `A reference has no scheme (https://); ${form}.`;
  let rest = text;
  let digest = '';
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    if (!/^sha256:[0-9a-f]{64}$/.test(digest)) return "After '@' comes a digest: sha256: and 64 lower-case hex digits.";
    rest = rest.slice(0, at);
  }
  const slash = rest.indexOf('/');
  if (slash >= 0 && /[.:]|^localhost$/.test(rest.slice(0, slash))) rest = rest.slice(slash + 1);
  let tag = '';
  const colon = rest.lastIndexOf(':');
  if (colon >= 0) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(tag)) return "The tag (after the last ':') must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'.";
  }
  if (!/^[a-z0-9._-]+(\/[a-z0-9._-]+)*$/.test(rest) || rest.length > 255) {
    return `The repository must be lower-case letters, digits, '.', '_' and '-', in names separated by single '/'; ${form}.`;
  }
  return { repository: rest, tag: tag || (digest ? '' : 'latest'), digest };
}

// edtd's default name: the repository's last name and the tag (by digest,
// its first 12 hex digits), as a DNS label: "pytorch:24.05-py3" gives
// "pytorch-24-05-py3".
export function defaultPullName(ref: Reference): string {
  const text = `${ref.repository.slice(ref.repository.lastIndexOf('/') + 1)}-${ref.digest ? ref.digest.slice('sha256:'.length, 'sha256:'.length + 12) : ref.tag}`;
  let name = '';
  for (const c of text) {
    const ok = /[A-Za-z0-9]/.test(c);
    if (ok || (name !== '' && !name.endsWith('-'))) name += ok ? c.toLowerCase() : '-';
  }
  return name.slice(0, 63).replace(/-+$/, '');
}

export interface PullInput {
  reference: string;
  name: string;
  username: string;
  password: string;
  frameworks: Framework[];
}

// What is wrong, per field, and the request to send: the credentials only
// when both are given, the name and frameworks only when chosen.
export function checkPull(input: PullInput, taken: string[]): { problems: [string, string | null][]; request: ImagePullRequest } {
  const { reference, name, username, password, frameworks } = input;
  const ref = parseReference(reference);
  const fallback = typeof ref === 'string' ? '' : defaultPullName(ref);
  const problems: [string, string | null][] = [
    ['reference', typeof ref === 'string' ? ref : null],
    ['name', name ? checkResourceName(name, 'image', taken) : taken.includes(fallback) ? `The default name "${fallback}" is an image's already; give this one another name.` : null],
    ['username', password && !username ? 'Give the registry user this password is for, or clear the password.' : null],
    ['password', username && !password ? `Give the registry password (or token) of ${username}, or clear the user.` : null],
  ];
  const request: ImagePullRequest = {
    reference,
    ...(name ? { name } : {}),
    ...(username && password ? { username, password } : {}),
    ...(frameworks.length ? { frameworks } : {}),
  };
  return { problems, request };
}

export function pulledMessage(p: ImagePulled): string {
  return `Pulled image ${p.image.name}: ${p.fetched_blobs} blob${p.fetched_blobs === 1 ? '' : 's'} fetched (${mib(p.fetched_bytes)} MiB), ${p.reused_blobs} reused.`;
}

function text(attrs: Record<string, string> = {}): HTMLInputElement {
  return h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', ...attrs });
}

function pullFields(): { fields: Record<string, Field>; frameworks: ReturnType<typeof frameworkChecks> } {
  const frameworks = frameworkChecks('pull', 'Frameworks it carries (optional)', "Default: those the image's label org.edt.frameworks names, else Horovod.");
  const fields: Record<string, Field> = {
    reference: field('pull-reference', 'reference', 'Reference', text({ class: 'mono', placeholder: 'nvcr.io/nvidia/pytorch:24.05-py3' }), 'REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:HEX; with no registry, Docker Hub (ubuntu:24.04).'),
    name: field('pull-name', 'name', 'Name (optional)', text({ placeholder: 'pytorch-24-05-py3' }), "Default: the repository's last name and the tag (by digest, its first 12 digits)."),
    username: field('pull-username', 'username', 'Registry user (optional)', text()),
    password: field('pull-password', 'password', 'Registry password or token (optional)', h('input', { type: 'password', autocomplete: 'off' }), 'With the user, for this pull only: edtd never stores it.'),
    frameworks: frameworks.field,
  };
  return { fields, frameworks };
}

// The admin's form. watch(pull) hears of each POST while it runs (the
// progress polls faster); reload() follows a pull that ended.
export function pullForm(ctx: Context, images: () => Image[], watch: (pull: Promise<unknown>) => void, reload: () => Promise<void>): HTMLElement {
  const { fields, frameworks } = pullFields();
  const input = (f: string) => fields[f].control as HTMLInputElement;
  // The Name's placeholder is the name edtd would choose for this reference.
  input('reference').addEventListener('input', () => {
    const ref = parseReference(input('reference').value.trim());
    input('name').placeholder = typeof ref === 'string' ? 'pytorch-24-05-py3' : defaultPullName(ref);
  });
  const formError = h('p', { class: 'field-error', id: 'pull-form-error', role: 'alert' });
  const button = h('button', { type: 'submit', id: 'image-pull' }, 'Pull image');
  const form = h(
    'form',
    { class: 'card form', id: 'pull-form', novalidate: true, 'aria-labelledby': 'pull-form-title' },
    h('h2', { id: 'pull-form-title' }, 'Pull an image'),
    h('p', { class: 'help' }, 'From a registry, by edtd: the request lasts as long as the pull, whose progress is shown above the images.'),
    Object.values(fields).map((f) => f.el),
    formError,
    h('div', { class: 'actions' }, button),
  );
  const busy = (on: boolean) => {
    button.disabled = on;
    button.textContent = on ? 'Pulling…' : 'Pull image';
    if (on) form.setAttribute('aria-busy', 'true');
    else form.removeAttribute('aria-busy');
  };
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (button.disabled) return;
    clearErrors(fields, formError);
    const value = (f: string) => input(f).value.trim();
    const { problems, request } = checkPull({ reference: value('reference'), name: value('name'), username: value('username'), password: input('password').value, frameworks: frameworks.ticked() }, images().map((i) => i.name));
    problems.forEach(([f, p]) => fields[f].set(p));
    const first = problems.find(([, p]) => p);
    if (first) return fields[first[0]].control.focus();
    // The password leaves the page with the request; nothing here keeps it.
    input('password').value = '';
    busy(true);
    const pull = ctx.api.pullImage(request);
    watch(pull);
    try {
      const pulled = await pull;
      form.reset();
      input('name').placeholder = 'pytorch-24-05-py3';
      ctx.notify(pulledMessage(pulled));
      await reload();
    } catch (err) {
      showError(err, fields, formError);
    } finally {
      busy(false);
    }
  });
  return form;
}

function pullRow(p: ImagePullProgress): HTMLElement {
  const sized = p.bytes > 0;
  const fetched = sized ? `${mib(p.bytes_fetched)} of ${mib(p.bytes)} MiB` : 'size not known yet';
  return h(
    'tr',
    { 'data-pull': p.name },
    h('th', { scope: 'row' }, p.name),
    h('td', { 'data-label': 'Reference', class: 'mono' }, p.reference),
    h('td', { 'data-label': 'Phase' }, phaseBadge(p.phase)),
    h('td', { 'data-label': 'Layers fetched/unpacked', 'data-col': 'layers' }, p.layers ? `${p.layers_fetched}/${p.layers_unpacked} of ${p.layers}` : '—'),
    h(
      'td',
      { 'data-label': 'Fetched', 'data-col': 'fetched' },
      // No size yet (resolving): a bar with no value, which moves without telling how far.
      h('progress', { max: sized ? p.bytes : null, value: sized ? p.bytes_fetched : null, 'aria-label': `Pull of ${p.name}: ${fetched} fetched` }),
      ' ',
      sized ? fetched : '—',
    ),
  );
}

// The pulls under way, polled while the view is open (ctx.poll stops when
// it is left); hidden when there are none. finished() follows a pull that
// left the list: its image is listed now, or it failed.
export function pullsTable(ctx: Context, finished: () => Promise<void>): { el: HTMLElement; watch(pull: Promise<unknown>): void } {
  let pulls: ImagePullProgress[] = [];
  let mine = 0;
  let asked = -Infinity;
  const body = h('tbody');
  const columns = ['Name', 'Reference', 'Phase', 'Layers fetched/unpacked', 'Fetched'];
  const el = h(
    'section',
    { class: 'scroll', id: 'pulls', 'aria-labelledby': 'pulls-title', tabindex: '0', hidden: true },
    h('h2', { id: 'pulls-title' }, 'Pulls under way'),
    h('table', { class: 'list', id: 'pulls-table' }, h('thead', {}, h('tr', {}, columns.map((t) => h('th', { scope: 'col' }, t)))), body),
  );
  async function load(): Promise<void> {
    asked = Date.now();
    const now = await ctx.api.listPulls();
    const ended = pulls.some((p) => !now.some((q) => q.name === p.name));
    pulls = now;
    el.hidden = pulls.length === 0;
    replace(body, pulls.map(pullRow));
    if (ended) await finished();
  }
  // A tick a second, which asks edtd only every 5 s while nothing is under
  // way: a pull this console starts shows within the second.
  ctx.poll(async () => {
    if (pulls.length || mine || Date.now() - asked >= kIdlePollMs) await load();
  }, kBusyPollMs);
  const done = () => (mine -= 1);
  return {
    el,
    watch(pull) {
      mine += 1;
      pull.then(done, done);
    },
  };
}

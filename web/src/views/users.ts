// Users and tokens. The admin lists users, makes one (its first token is
// shown once, with a copy button), deletes one (edtd refuses while they own
// a cluster or a volume: the refusal is shown in their row), and opens any
// user's tokens. Everyone else sees their own tokens. A token list shows
// id, description, when it was made, when it expires and whether it has;
// a new token, with an optional lifetime, is shown once; Revoke ends one.

import type { NewToken, TokenInfo, User } from '../api';
import type { Context } from '../app';
import { attr, h, replace } from '../dom';
import { checkResourceName, checkTokenDescription, checkTokenLifetime, unixTime } from '../platform';
import { confirmDialog } from './dialog';
import { type Field, clearErrors, field, plainMessage, secretBox, showError } from './fields';

function newTokenNote(t: NewToken): string {
  const expiry = t.expires_at ? `It expires ${unixTime(t.expires_at, '')}.` : 'It never expires.';
  return `edtd keeps only its hash, so this is the only time it is shown: copy it now. ${expiry}`;
}

export async function usersView(ctx: Context, root: HTMLElement): Promise<void> {
  const me = await ctx.api.whoami();
  if (!me.admin) return tokensView(ctx, root, { name: me.name });
  let users: User[] = [];
  const rowErrors = new Map<string, string>();
  const body = h('tbody');
  const created = h('div', { id: 'user-created', 'aria-live': 'polite' });

  const fields: Record<string, Field> = {
    name: field('user-name', 'name', 'Name', h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'alice' }), 'A DNS label. The user gets a first token, shown once.'),
  };
  const formError = h('p', { class: 'field-error', id: 'user-form-error', role: 'alert' });
  const form = h(
    'form',
    { class: 'card form', id: 'user-form', novalidate: true, 'aria-labelledby': 'user-form-title' },
    h('h2', { id: 'user-form-title' }, 'Create a user'),
    fields['name'].el,
    formError,
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'user-create' }, 'Create user')),
    created,
  );

  function render(): void {
    replace(
      body,
      users.map((u) =>
        h(
          'tr',
          { 'data-user': u.name },
          h('th', { scope: 'row' }, u.name),
          h('td', { 'data-label': 'Role' }, u.admin ? 'admin' : 'user'),
          h('td', {}, h('a', { href: `#/users/${encodeURIComponent(u.name)}`, 'aria-label': `Tokens of ${u.name}` }, 'Tokens')),
          h(
            'td',
            {},
            u.admin
              ? h('span', { class: 'muted' }, 'cannot be deleted')
              : h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete user ${u.name}`, 'aria-describedby': `user-${u.name}-error`, onclick: () => void remove(u.name) }, 'Delete'),
            h('p', { class: 'field-error', id: `user-${u.name}-error`, role: 'alert', 'data-row-error': u.name }, rowErrors.get(u.name) ?? ''),
          ),
        ),
      ),
    );
  }

  async function load(): Promise<void> {
    users = (await ctx.api.listUsers()).sort((a, b) => a.name.localeCompare(b.name));
    render();
  }

  async function remove(name: string): Promise<void> {
    rowErrors.delete(name);
    const ok = await confirmDialog({ title: `Delete user ${name}?`, body: 'Their tokens stop working at once.', confirm: 'Delete', danger: true });
    if (!ok) return;
    try {
      await ctx.api.deleteUser(name);
      ctx.notify(`Deleted user ${name}.`);
    } catch (e) {
      rowErrors.set(name, plainMessage(e));
    }
    await load();
    body.querySelector<HTMLElement>(`${attr('data-user', name)} button`)?.focus();
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(fields, formError);
    replace(created);
    const input = fields['name'].control as HTMLInputElement;
    const name = input.value.trim();
    const problem = checkResourceName(name, 'user', users.map((u) => u.name));
    if (problem) {
      fields['name'].set(problem);
      input.focus();
      return;
    }
    try {
      const token = await ctx.api.createUser(name);
      input.value = '';
      replace(created, secretBox('new-token', `The token of ${token.name}`, token.token, newTokenNote(token)));
      await load();
    } catch (err) {
      showError(err, fields, formError);
    }
  });

  root.append(
    h('div', { class: 'toolbar' }, h('h1', { id: 'users-title' }, 'Users and tokens')),
    h(
      'div',
      { class: 'stack' },
      h(
        'section',
        { class: 'scroll', 'aria-labelledby': 'users-title', tabindex: '0' },
        h('table', { class: 'list', id: 'users-table' }, h('thead', {}, h('tr', {}, ['Name', 'Role', 'Tokens', ''].map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'sr-only' }, 'Actions'))))), body),
      ),
      form,
    ),
  );
  await load();
}

// One user's tokens: #/users/NAME (the admin, or the user).
export async function tokensView(ctx: Context, root: HTMLElement, params: Record<string, string>): Promise<void> {
  const user = params['name'];
  const me = await ctx.api.whoami();
  let tokens: TokenInfo[] = [];
  const rowErrors = new Map<number, string>();
  const body = h('tbody');
  const created = h('div', { id: 'token-created', 'aria-live': 'polite' });

  const fields: Record<string, Field> = {
    expires_in: field('token-expires', 'expires_in', 'Expires in (optional)', h('input', { type: 'text', class: 'short', autocomplete: 'off', spellcheck: 'false', placeholder: '90d' }), 'A whole number with s, m, h or d, from 1s to 365d; empty: never expires.'),
    description: field('token-description', 'description', 'Description (optional)', h('input', { type: 'text', autocomplete: 'off', placeholder: 'ci runner' })),
  };
  const formError = h('p', { class: 'field-error', id: 'token-form-error', role: 'alert' });
  const form = h(
    'form',
    { class: 'card form', id: 'token-form', novalidate: true, 'aria-labelledby': 'token-form-title' },
    h('h2', { id: 'token-form-title' }, `New token for ${user}`),
    Object.values(fields).map((f) => f.el),
    formError,
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'token-create' }, 'Create token')),
    created,
  );

  function render(): void {
    replace(body, tokens.length ? tokens.map((t) => tokenRow(t, rowErrors.get(t.id) ?? '', () => void revoke(t.id))) : h('tr', {}, h('td', { colspan: 6, class: 'empty' }, 'No tokens.')));
  }

  async function load(): Promise<void> {
    tokens = await ctx.api.listTokens(user);
    render();
  }

  async function revoke(id: number): Promise<void> {
    rowErrors.delete(id);
    const ok = await confirmDialog({ title: `Revoke token ${id} of ${user}?`, body: 'It stops working at once.', confirm: 'Revoke', danger: true });
    if (!ok) return;
    try {
      await ctx.api.revokeToken(user, id);
      ctx.notify(`Revoked token ${id} of ${user}.`);
    } catch (e) {
      rowErrors.set(id, plainMessage(e));
    }
    await load();
    body.querySelector<HTMLElement>(`${attr('data-token', String(id))} button`)?.focus();
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(fields, formError);
    replace(created);
    const expires = (fields['expires_in'].control as HTMLInputElement).value.trim();
    const description = (fields['description'].control as HTMLInputElement).value.trim();
    const problems: [string, string | null][] = [
      ['expires_in', checkTokenLifetime(expires)],
      ['description', checkTokenDescription(description)],
    ];
    const first = problems.find(([, p]) => p);
    problems.forEach(([f, p]) => fields[f].set(p));
    if (first) {
      fields[first[0]].control.focus();
      return;
    }
    try {
      const token = await ctx.api.createToken(user, { ...(expires ? { expires_in: expires } : {}), ...(description ? { description } : {}) });
      form.reset();
      replace(created, secretBox('new-token', `The new token of ${user}`, token.token, newTokenNote(token)));
      await load();
    } catch (err) {
      showError(err, fields, formError);
    }
  });

  root.append(
    ...(me.admin ? [h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/users' }, 'Users'), ' / ', user)] : []),
    h('div', { class: 'toolbar' }, h('h1', { id: 'tokens-title' }, user === me.name ? 'Your tokens' : `Tokens of ${user}`)),
    h(
      'div',
      { class: 'stack' },
      h(
        'section',
        { class: 'scroll', 'aria-labelledby': 'tokens-title', tabindex: '0' },
        h('table', { class: 'list', id: 'tokens-table' }, h('thead', {}, h('tr', {}, ['ID', 'Description', 'Created', 'Expires', 'State', ''].map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'sr-only' }, 'Actions'))))), body),
        h('p', { class: 'help' }, 'The tokens themselves are never listed: edtd keeps only their hashes. An expired token is refused and listed until revoked.'),
      ),
      form,
    ),
  );
  await load();
}

function tokenRow(t: TokenInfo, error: string, onRevoke: () => void): HTMLElement {
  return h(
    'tr',
    { 'data-token': t.id },
    h('th', { scope: 'row', class: 'num' }, String(t.id)),
    h('td', { 'data-label': 'Description' }, t.description || h('span', { class: 'muted' }, '—')),
    h('td', { 'data-label': 'Created' }, unixTime(t.created_at, '—')),
    h('td', { 'data-label': 'Expires' }, unixTime(t.expires_at, 'never')),
    h('td', { 'data-label': 'State', 'data-col': 'state' }, t.expired ? h('span', { class: 'phase phase-failed', 'data-phase': 'Expired' }, 'Expired') : h('span', { class: 'phase phase-running', 'data-phase': 'Valid' }, 'Valid')),
    h(
      'td',
      {},
      h('button', { type: 'button', class: 'danger small', 'aria-label': `Revoke token ${t.id}`, 'aria-describedby': `token-${t.id}-error`, onclick: onRevoke }, 'Revoke'),
      h('p', { class: 'field-error', id: `token-${t.id}-error`, role: 'alert', 'data-row-error': String(t.id) }, error),
    ),
  );
}

// Sign in with an API token (the admin's from DATA_DIR/admin.token, or one
// the admin made for a user). The token is checked against the API before it
// is kept.

import { Api, ApiError } from '../api';
import type { Context } from '../app';
import { describe } from '../app';
import { h } from '../dom';

export async function signInView(ctx: Context, root: HTMLElement): Promise<void> {
  const error = h('p', { class: 'field-error', id: 'token-error', role: 'alert' });
  const input = h('input', {
    id: 'token',
    name: 'token',
    type: 'password',
    autocomplete: 'current-password',
    required: true,
    'aria-describedby': 'token-help token-error',
    spellcheck: 'false',
  });
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    {
      class: 'card narrow',
      'aria-labelledby': 'signin-title',
      onsubmit: async (e: Event) => {
        e.preventDefault();
        const token = input.value.trim();
        error.textContent = '';
        input.removeAttribute('aria-invalid');
        if (!token) {
          error.textContent = 'Paste your API token.';
          input.setAttribute('aria-invalid', 'true');
          input.focus();
          return;
        }
        submit.disabled = true;
        try {
          // A client of its own, so a wrong token does not sign out a session.
          await new Api({ token: () => token }).whoami();
          ctx.setToken(token);
          ctx.navigate('#/clusters');
        } catch (err) {
          error.textContent =
            err instanceof ApiError && err.status === 401 ? 'edtd does not know this token; check it and try again.' : describe(err);
          input.setAttribute('aria-invalid', 'true');
          input.focus();
        } finally {
          submit.disabled = false;
        }
      },
    },
    h('h1', { id: 'signin-title' }, 'Sign in to edt'),
    h('label', { for: 'token' }, 'API token'),
    input,
    h('p', { class: 'help', id: 'token-help' }, 'An administrator finds theirs in edtd\u2019s data directory (admin.token) and makes tokens for users.'),
    error,
    h('div', { class: 'actions' }, submit),
  );
  root.append(form);
  input.focus();
}

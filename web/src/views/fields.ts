// The small forms of the platform views (volumes, users, tokens, images):
// a labelled control with its help and its error line, and the placing of
// an error, client-side or edtd's, next to the field it names.

import { ApiError, type Framework } from '../api';
import { describe } from '../app';
import { h } from '../dom';
import { kFrameworks } from '../validate';

export interface Field {
  // What the label and error line wrap.
  el: HTMLElement;
  control: HTMLInputElement | HTMLSelectElement | HTMLElement;
  error: HTMLElement;
  // Shows message next to the field (null clears it).
  set(message: string | null): void;
}

// id names the control (its error line is id-error, its help id-help);
// field is the API's name for it, which edtd's errors use.
export function field(id: string, field: string, label: string, control: HTMLInputElement | HTMLSelectElement | HTMLElement, help?: string | Node): Field {
  const error = h('p', { class: 'field-error', id: `${id}-error`, 'data-error-for': field, role: 'alert' });
  control.id = id;
  control.dataset.field = field;
  control.setAttribute('aria-describedby', [help ? `${id}-help` : '', `${id}-error`].filter(Boolean).join(' '));
  const el = h('div', { class: 'field' }, h('label', { for: id }, label), control, help ? h('p', { class: 'help', id: `${id}-help` }, help) : null, error);
  return {
    el,
    control,
    error,
    set(message) {
      error.textContent = message ?? '';
      if (message) control.setAttribute('aria-invalid', 'true');
      else control.removeAttribute('aria-invalid');
    },
  };
}

// A group of controls under a legend (check boxes), with one error line.
export function fieldset(id: string, field: string, legend: string, ...controls: Node[]): Field {
  const error = h('p', { class: 'field-error', id: `${id}-error`, 'data-error-for': field, role: 'alert' });
  const group = h('div', { id, 'data-field': field, role: 'group', 'aria-labelledby': `${id}-legend`, 'aria-describedby': `${id}-error` }, ...controls);
  const el = h('fieldset', { class: 'field' }, h('legend', { id: `${id}-legend` }, legend), group, error);
  return {
    el,
    control: group,
    error,
    set(message) {
      error.textContent = message ?? '';
      if (message) group.setAttribute('aria-invalid', 'true');
      else group.removeAttribute('aria-invalid');
    },
  };
}

// A check box per framework under a legend (ids PREFIX-framework-ID in a
// group PREFIX-frameworks), as one field, with a help line if given;
// ticked() reads them.
export function frameworkChecks(prefix: string, legend: string, help?: string): { field: Field; boxes: HTMLInputElement[]; ticked(): Framework[] } {
  const id = `${prefix}-frameworks`;
  const boxes = kFrameworks.map((f) => h('input', { type: 'checkbox', value: f.id, id: `${prefix}-framework-${f.id}` }));
  const labels = kFrameworks.map((f, i) => h('label', { class: 'check', for: boxes[i].id }, boxes[i], f.label));
  const checks = fieldset(id, 'frameworks', legend, ...labels);
  if (help) {
    checks.error.before(h('p', { class: 'help', id: `${id}-help` }, help));
    checks.control.setAttribute('aria-describedby', `${id}-help ${id}-error`);
  }
  return { field: checks, boxes, ticked: () => boxes.filter((b) => b.checked).map((b) => b.value as Framework) };
}

// Puts an error next to the field edtd named (a field of fields, or one
// whose name starts with it: "frameworks[0]"), else into the form's own
// error line; focuses what it concerns. Returns the field it landed on.
export function showError(err: unknown, fields: Record<string, Field>, formError: Field | HTMLElement): string | undefined {
  const named = err instanceof ApiError && err.field ? Object.keys(fields).find((f) => err.field === f || err.field!.startsWith(`${f}[`) || err.field!.startsWith(`${f}.`)) : undefined;
  const message = plainMessage(err);
  if (named) {
    fields[named].set(message);
    fields[named].control.focus();
    return named;
  }
  if (formError instanceof HTMLElement) formError.textContent = message;
  else {
    formError.set(message);
    formError.control.focus();
  }
  return undefined;
}

// An error's message without the "(field x)" describe() adds: for a place
// that already shows what it concerns (a field, a row).
export function plainMessage(err: unknown): string {
  return err instanceof ApiError ? err.message : describe(err);
}

export function clearErrors(fields: Record<string, Field>, ...lines: HTMLElement[]): void {
  Object.values(fields).forEach((f) => f.set(null));
  lines.forEach((l) => (l.textContent = ''));
}

// Shows a secret once, with a button that copies it. The text stays
// selectable, for when the clipboard is not allowed.
export function secretBox(id: string, title: string, secret: string, note: string): HTMLElement {
  const value = h('code', { class: 'secret', id }, secret);
  const copied = h('span', { class: 'muted', role: 'status', id: `${id}-copied` });
  const copy = h(
    'button',
    {
      type: 'button',
      class: 'secondary small',
      id: `${id}-copy`,
      'aria-label': `Copy ${title.toLowerCase()}`,
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(secret);
          copied.textContent = 'Copied.';
        } catch {
          const range = document.createRange();
          range.selectNodeContents(value);
          window.getSelection()?.removeAllRanges();
          window.getSelection()?.addRange(range);
          copied.textContent = 'The clipboard is not available here: the token is selected, press Ctrl+C.';
        }
      },
    },
    'Copy',
  );
  return h('div', { class: 'secret-box', role: 'region', 'aria-label': title }, h('p', {}, h('strong', {}, title), ' ', note), h('div', { class: 'actions' }, value, copy, copied));
}

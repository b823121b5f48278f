// Images: each with the frameworks it carries, its size and its source (the
// path an imported image came from, the reference a pulled one came from,
// else its root file system), and above them the pulls under way. The admin
// registers one (an unpacked root with a /usr, or / for the host's) or pulls
// one from a registry (pull.ts); edtd's refusal is shown next to the field it
// names. Imports are the CLI's and the API's (edt image import, docs/images.md).

import type { Image } from '../api';
import type { Context } from '../app';
import { h, replace } from '../dom';
import { checkResourceName } from '../platform';
import { type Field, clearErrors, field, frameworkChecks, showError } from './fields';
import { frameworkLabel } from './clusters';
import { pullForm, pullsTable } from './pull';

export async function imagesView(ctx: Context, root: HTMLElement): Promise<void> {
  const me = await ctx.api.whoami();
  let images: Image[] = [];
  const body = h('tbody');
  const pulls = pullsTable(ctx, () => load());

  async function load(): Promise<void> {
    images = (await ctx.api.listImages()).sort((a, b) => a.name.localeCompare(b.name));
    replace(
      body,
      images.length
        ? images.map((i) =>
            h(
              'tr',
              { 'data-image': i.name },
              h('th', { scope: 'row' }, i.name),
              h('td', { 'data-label': 'Frameworks' }, i.frameworks.map(frameworkLabel).join(', ') || '—'),
              h('td', { 'data-label': 'Size' }, i.size_bytes ? `${Math.ceil(i.size_bytes / 2 ** 20)} MiB` : '—'),
              // An imported or pulled image: the path or reference it came from; else its root.
              h('td', { 'data-label': 'Source', class: 'mono' }, i.source || (i.root ?? '—')),
              h('td', { 'data-label': 'Built in' }, i.builtin ? 'yes' : 'no'),
            ),
          )
        : h('tr', {}, h('td', { colspan: 5, class: 'empty' }, 'No images.')),
    );
  }

  root.append(
    h('div', { class: 'toolbar' }, h('h1', { id: 'images-title' }, 'Images')),
    h(
      'div',
      { class: 'stack' },
      pulls.el,
      h(
        'section',
        { class: 'scroll', 'aria-labelledby': 'images-title', tabindex: '0' },
        h('table', { class: 'list', id: 'images-table' }, h('thead', {}, h('tr', {}, ['Name', 'Frameworks', 'Size', 'Source', 'Built in'].map((t) => h('th', { scope: 'col' }, t)))), body),
      ),
      me.admin
        ? h('div', { class: 'grid', id: 'image-forms' }, imageForm(ctx, () => images, load), pullForm(ctx, () => images, pulls.watch, load))
        : h('p', { class: 'help' }, 'The admin registers and pulls images.'),
    ),
  );
  await load();
}

function imageForm(ctx: Context, images: () => Image[], reload: () => Promise<void>): HTMLElement {
  const frameworks = frameworkChecks('image', 'Frameworks it carries');
  const fields: Record<string, Field> = {
    name: field('image-name', 'name', 'Name', h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'pytorch' })),
    root: field('image-root', 'root', 'Root file system', h('input', { type: 'text', class: 'mono', autocomplete: 'off', spellcheck: 'false', value: '/' }), 'An unpacked root file system with a /usr on the host; / is the host\'s own.'),
    frameworks: frameworks.field,
  };
  const formError = h('p', { class: 'field-error', id: 'image-form-error', role: 'alert' });
  const form = h(
    'form',
    { class: 'card form', id: 'image-form', novalidate: true, 'aria-labelledby': 'image-form-title' },
    h('h2', { id: 'image-form-title' }, 'Register an image'),
    Object.values(fields).map((f) => f.el),
    formError,
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'image-create' }, 'Register image')),
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(fields, formError);
    const name = (fields['name'].control as HTMLInputElement).value.trim();
    const rootPath = (fields['root'].control as HTMLInputElement).value.trim();
    const ticked = frameworks.ticked();
    const problems: [string, string | null][] = [
      ['name', checkResourceName(name, 'image', images().map((i) => i.name))],
      ['root', rootPath.startsWith('/') ? null : `"${rootPath}" is not an absolute path; write one such as /srv/images/pytorch, or / for the host's.`],
      ['frameworks', ticked.length ? null : 'Tick at least one framework the image carries.'],
    ];
    problems.forEach(([f, p]) => fields[f].set(p));
    const first = problems.find(([, p]) => p);
    if (first) {
      (first[0] === 'frameworks' ? frameworks.boxes[0] : fields[first[0]].control).focus();
      return;
    }
    try {
      await ctx.api.createImage({ name, root: rootPath, frameworks: ticked });
      form.reset();
      (fields['root'].control as HTMLInputElement).value = '/';
      ctx.notify(`Registered image ${name}.`);
      await reload();
    } catch (err) {
      showError(err, fields, formError);
    }
  });
  return form;
}

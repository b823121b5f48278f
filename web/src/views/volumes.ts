// Volumes: the ones the user may see, which clusters mount each, a link to
// each one's files (files.ts), a form to make one, a form to upload files
// into one (upload.ts), and Delete, whose refusal (409 while a cluster
// mounts it) is shown in the volume's row.

import type { Cluster, Volume } from '../api';
import type { Context } from '../app';
import { attr, h, keepFocus, replace } from '../dom';
import { checkResourceName, mountedBy } from '../platform';
import { confirmDialog } from './dialog';
import { type Field, clearErrors, field, plainMessage, showError } from './fields';
import { uploadForm } from './upload';

export async function volumesView(ctx: Context, root: HTMLElement): Promise<void> {
  const me = await ctx.api.whoami();
  let volumes: Volume[] = [];
  let clusters: Cluster[] = [];
  // Each row's last error, kept across refreshes until the next try.
  const rowErrors = new Map<string, string>();
  const body = h('tbody');

  const fields: Record<string, Field> = {
    name: field('volume-name', 'name', 'Name', h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'data' }), 'A DNS label; clusters mount it by this name.'),
  };
  if (me.admin) {
    fields['host_path'] = field(
      'volume-host-path',
      'host_path',
      'Host directory (optional)',
      h('input', { type: 'text', class: 'mono', autocomplete: 'off', spellcheck: 'false', placeholder: '/srv/datasets' }),
      'An existing directory on the host to register as the volume; empty: edtd makes a directory of its own (removed with the volume).',
    );
  }
  const formError = h('p', { class: 'field-error', id: 'volume-form-error', role: 'alert' });
  const form = h(
    'form',
    { class: 'card form', id: 'volume-form', novalidate: true, 'aria-labelledby': 'volume-form-title' },
    h('h2', { id: 'volume-form-title' }, 'Create a volume'),
    Object.values(fields).map((f) => f.el),
    formError,
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'volume-create' }, 'Create volume')),
  );

  const upload = uploadForm(ctx.api, ctx.notify.bind(ctx));

  function render(): void {
    upload.setVolumes(volumes.map((v) => v.name));
    const mounts = mountedBy(volumes, clusters);
    replace(
      body,
      volumes.length
        ? volumes.map((v) => volumeRow(v, mounts.get(v.name) ?? [], rowErrors.get(v.name) ?? '', () => void remove(v.name)))
        : h('tr', {}, h('td', { colspan: 5, class: 'empty' }, 'No volumes yet.')),
    );
  }

  async function load(): Promise<void> {
    [volumes, clusters] = await Promise.all([ctx.api.listVolumes(), ctx.api.listClusters()]);
    volumes.sort((a, b) => a.name.localeCompare(b.name));
    for (const name of [...rowErrors.keys()]) if (!volumes.some((v) => v.name === name)) rowErrors.delete(name);
    keepFocus(body, render);
  }

  async function remove(name: string): Promise<void> {
    rowErrors.delete(name);
    const ok = await confirmDialog({ title: `Delete volume ${name}?`, body: 'Its files go with it (a registered host directory stays on the host).', confirm: 'Delete', danger: true });
    if (!ok) return;
    try {
      await ctx.api.deleteVolume(name);
      ctx.notify(`Deleted volume ${name}.`);
    } catch (e) {
      rowErrors.set(name, plainMessage(e));
    }
    await load();
    body.querySelector<HTMLElement>(`${attr('data-volume', name)} button`)?.focus();
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(fields, formError);
    const name = (fields['name'].control as HTMLInputElement).value.trim();
    const hostPath = (fields['host_path']?.control as HTMLInputElement | undefined)?.value.trim() ?? '';
    const problem = checkResourceName(name, 'volume', volumes.map((v) => v.name));
    if (problem) {
      fields['name'].set(problem);
      fields['name'].control.focus();
      return;
    }
    try {
      await ctx.api.createVolume(hostPath ? { name, host_path: hostPath } : { name });
      form.reset();
      ctx.notify(`Created volume ${name}.`);
      await load();
    } catch (err) {
      showError(err, fields, formError);
    }
  });

  root.append(
    h('div', { class: 'toolbar' }, h('h1', { id: 'volumes-title' }, 'Volumes')),
    h(
      'div',
      { class: 'stack' },
      h(
        'section',
        { class: 'scroll', 'aria-labelledby': 'volumes-title', tabindex: '0' },
        h(
          'table',
          { class: 'list', id: 'volumes-table' },
          h('thead', {}, h('tr', {}, ['Name', 'Owner', 'Directory', 'Mounted by', ''].map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'sr-only' }, 'Actions'))))),
          body,
        ),
        h('p', { class: 'help' }, 'Files lists what a volume holds. Upload files below, or write them from a cluster that mounts the volume (its terminal or a job).'),
      ),
      form,
      upload.el,
    ),
  );
  ctx.poll(load, 3000);
}

function volumeRow(v: Volume, mountedBy: string[], error: string, onDelete: () => void): HTMLElement {
  return h(
    'tr',
    { 'data-volume': v.name },
    h('th', { scope: 'row' }, v.name),
    h('td', { 'data-label': 'Owner' }, v.owner ?? '—'),
    h('td', { 'data-label': 'Directory', class: 'mono' }, v.host_path ?? '—', v.managed ? h('span', { class: 'muted' }, ' (made by edtd)') : null),
    h(
      'td',
      { 'data-label': 'Mounted by', 'data-col': 'mounted-by' },
      mountedBy.length ? mountedBy.flatMap((c, i) => [i ? ', ' : '', h('a', { href: `#/clusters/${encodeURIComponent(c)}` }, c)]) : h('span', { class: 'muted' }, 'no cluster'),
    ),
    h(
      'td',
      { class: 'row-actions' },
      h('a', { class: 'button small secondary', href: `#/volumes/${encodeURIComponent(v.name)}/files`, 'aria-label': `Files of ${v.name}` }, 'Files'),
      h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete volume ${v.name}`, 'aria-describedby': `volume-${v.name}-error`, onclick: onDelete }, 'Delete'),
      h('p', { class: 'field-error', id: `volume-${v.name}-error`, role: 'alert', 'data-row-error': v.name }, error),
    ),
  );
}

// The clusters list: one row per cluster, refreshed every two seconds, with
// check boxes to act on several at once.

import type { Cluster } from '../api';
import type { Context } from '../app';
import { describe } from '../app';
import { age, h, keepFocus, phaseBadge, replace } from '../dom';
import { kFrameworks } from '../validate';
import { confirmDialog } from './dialog';

export function frameworkLabel(id: string): string {
  return kFrameworks.find((f) => f.id === id)?.label ?? id;
}

export function runningCount(c: Cluster): string {
  const running = c.container_status.filter((s) => s.phase === 'Running').length;
  return `${running}/${c.containers}`;
}

export function gpuSummary(c: Cluster): string {
  return c.gpu && c.gpu.count > 0 ? `${c.gpu.count * c.containers} × ${c.gpu.model}` : '—';
}

export function clustersView(ctx: Context, root: HTMLElement): void {
  const selected = new Set<string>();
  let clusters: Cluster[] = [];

  const deleteButton = h('button', { type: 'button', class: 'danger', id: 'delete-selected', disabled: true }, 'Delete');
  const selection = h('span', { class: 'muted', 'aria-live': 'polite' });
  const body = h('tbody');
  const selectAll = h('input', { type: 'checkbox', 'aria-label': 'Select all clusters' });

  function refreshSelection(): void {
    for (const name of [...selected]) if (!clusters.some((c) => c.name === name)) selected.delete(name);
    deleteButton.disabled = selected.size === 0;
    selection.textContent = selected.size ? `${selected.size} selected` : '';
    selectAll.checked = clusters.length > 0 && selected.size === clusters.length;
    selectAll.indeterminate = selected.size > 0 && selected.size < clusters.length;
  }

  function render(): void {
    if (!clusters.length) {
      replace(body, h('tr', {}, h('td', { colspan: 7, class: 'empty' }, 'No clusters yet. Press ', h('a', { href: '#/create' }, 'Create'), ' to make one.')));
    } else {
      replace(
        body,
        clusters.map((c) =>
          h(
            'tr',
            { 'data-cluster': c.name },
            h(
              'td',
              {},
              h('input', {
                type: 'checkbox',
                'aria-label': `Select ${c.name}`,
                checked: selected.has(c.name),
                onchange: (e: Event) => {
                  if ((e.target as HTMLInputElement).checked) selected.add(c.name);
                  else selected.delete(c.name);
                  refreshSelection();
                },
              }),
            ),
            h('th', { scope: 'row' }, h('a', { href: `#/clusters/${encodeURIComponent(c.name)}` }, c.name)),
            h('td', { 'data-label': 'Framework' }, frameworkLabel(c.framework)),
            h('td', { 'data-label': 'Containers', class: 'num', 'data-col': 'containers' }, runningCount(c)),
            h('td', { 'data-label': 'GPUs' }, gpuSummary(c)),
            h('td', { 'data-label': 'Phase', title: c.queued ? c.queued.reason : c.message }, phaseBadge(c.phase),
              c.queued ? h('span', { 'data-col': 'queue' }, ` #${c.queued.position} in the queue`) : ''),
            h('td', { 'data-label': 'Age', title: c.created ?? '' }, age(c.created)),
          ),
        ),
      );
    }
    refreshSelection();
  }

  selectAll.addEventListener('change', () => {
    if (selectAll.checked) clusters.forEach((c) => selected.add(c.name));
    else selected.clear();
    render();
  });

  deleteButton.addEventListener('click', async () => {
    const names = [...selected];
    const ok = await confirmDialog({
      title: `Delete ${names.length === 1 ? names[0] : `${names.length} clusters`}?`,
      body: `Every container of ${names.join(', ')} stops and its files go; volumes stay.`,
      confirm: 'Delete',
      danger: true,
    });
    if (!ok) return;
    const failures: string[] = [];
    for (const name of names) {
      try {
        await ctx.api.deleteCluster(name);
        selected.delete(name);
      } catch (e) {
        failures.push(`${name}: ${describe(e)}`);
      }
    }
    ctx.notify(failures.length ? `Not deleted: ${failures.join('; ')}` : `Deleting ${names.join(', ')}.`, failures.length ? 'error' : 'info');
    clusters = await ctx.api.listClusters();
    render();
  });

  root.append(
    h(
      'section',
      { 'aria-labelledby': 'clusters-title' },
      h(
        'div',
        { class: 'toolbar' },
        h('h1', { id: 'clusters-title' }, 'Distributed training clusters'),
        h('div', { class: 'actions' }, selection, deleteButton, h('a', { class: 'button', href: '#/create', id: 'create' }, 'Create')),
      ),
      h(
        'table',
        { class: 'list', id: 'clusters' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('td', {}, selectAll),
            ['Name', 'Framework', 'Containers (Running/total)', 'GPUs', 'Phase', 'Age'].map((t) => h('th', { scope: 'col' }, t)),
          ),
        ),
        body,
      ),
    ),
  );

  ctx.poll(async () => {
    clusters = (await ctx.api.listClusters()).sort((a, b) => a.name.localeCompare(b.name));
    keepFocus(body, render);
  }, 2000);
}

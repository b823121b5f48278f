// GPUs: the inventory edtd allocates from, each GPU with what holds it as
// the API tells the caller: the container and its cluster when it is the
// caller's (the admin sees every holder), "held" when another user's
// container has it, "free" otherwise. Refreshed every two seconds.

import type { Cluster, Gpu } from '../api';
import type { Context } from '../app';
import { h, keepFocus, replace } from '../dom';
import { gpuRows } from '../platform';

export function gpusView(ctx: Context, root: HTMLElement): void {
  const body = h('tbody');
  const summary = h('p', { class: 'muted', id: 'gpus-summary' });

  function render(gpus: Gpu[], clusters: Cluster[]): void {
    const rows = gpuRows(gpus, clusters);
    const free = rows.filter((r) => r.state === 'free').length;
    summary.textContent = rows.length ? `${free} of ${rows.length} free.` : '';
    replace(
      body,
      rows.length
        ? rows.map((r) =>
            h(
              'tr',
              { 'data-gpu': r.index, 'data-state': r.state },
              h('th', { scope: 'row', class: 'num' }, String(r.index)),
              h('td', { 'data-label': 'Model' }, r.model, r.simulated ? h('span', { class: 'muted' }, ' (simulated)') : null),
              h('td', { 'data-label': 'State' }, h('span', { class: `phase phase-${r.state === 'free' ? 'running' : 'pending'}`, 'data-phase': r.state === 'free' ? 'Free' : 'Held' }, r.state === 'free' ? 'Free' : 'Held')),
              h('td', { 'data-label': 'Container', class: 'mono', 'data-col': 'holder' }, r.holder || (r.state === 'held' ? h('span', { class: 'muted' }, "another user's") : '—')),
              h('td', { 'data-label': 'Cluster', 'data-col': 'cluster' }, r.cluster ? h('a', { href: `#/clusters/${encodeURIComponent(r.cluster)}` }, r.cluster) : '—'),
            ),
          )
        : h('tr', {}, h('td', { colspan: 5, class: 'empty' }, 'edtd has no GPUs.')),
    );
  }

  root.append(
    h('div', { class: 'toolbar' }, h('h1', { id: 'gpus-title' }, 'GPUs'), summary),
    h(
      'section',
      { class: 'scroll', 'aria-labelledby': 'gpus-title', tabindex: '0' },
      h('table', { class: 'list', id: 'gpus-table' }, h('thead', {}, h('tr', {}, ['GPU', 'Model', 'State', 'Held by container', 'Cluster'].map((t) => h('th', { scope: 'col' }, t)))), body),
      h('p', { class: 'help' }, "A GPU held by another user's container is shown as held, without naming it; the admin sees every holder."),
    ),
  );
  ctx.poll(async () => {
    const [gpus, clusters] = await Promise.all([ctx.api.listGpuDevices(), ctx.api.listClusters()]);
    keepFocus(body, () => render(gpus, clusters));
  }, 2000);
}

// One job: its command and state, the log as it grows, and a chart of the
// metrics its lines print (loss, accuracy, samples/s).

import type { Job } from '../api';
import type { Context } from '../app';
import { describe } from '../app';
import { h, phaseBadge, replace } from '../dom';
import { lineChart } from '../chart';
import { MetricsParser } from '../logparse';

// Keeps the log's DOM bounded for long jobs; the whole log stays on the server.
const kMaxLogChars = 2_000_000;

export async function jobView(ctx: Context, root: HTMLElement, params: Record<string, string>): Promise<void> {
  const id = params['id'];
  let job: Job = await ctx.api.getJob(id);

  const info = h('dl', { class: 'summary' });
  const log = h('pre', { class: 'log', id: 'job-log', tabindex: '0', role: 'region', 'aria-label': 'Job log', 'aria-live': 'off' });
  const charts = h('div', { class: 'charts', id: 'job-charts' });
  const follow = h('input', { type: 'checkbox', id: 'follow', checked: true });
  const parser = new MetricsParser();

  function renderInfo(): void {
    replace(
      info,
      ...[
        ['Cluster', h('a', { href: `#/clusters/${encodeURIComponent(job.cluster)}` }, job.cluster)],
        ['Container', job.container ?? '—'],
        ['Command', h('code', {}, job.command)],
        ['Phase', phaseBadge(job.phase)],
        ['Exit code', job.exit_code === null ? '—' : String(job.exit_code)],
        ['Started', job.started ? new Date(job.started).toLocaleString() : '—'],
        ['Finished', job.finished ? new Date(job.finished).toLocaleString() : '—'],
      ].flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-key': String(k) }, v)]),
    );
  }

  function renderCharts(): void {
    const fields = parser.fields();
    replace(
      charts,
      fields.length
        ? fields.map((f) => h('figure', { class: 'chart-box' }, h('figcaption', {}, f.label, ' ', h('span', { class: 'muted' }, lastValue(f.key))), lineChart(f.key, f.label, parser.points)))
        : h('p', { class: 'muted' }, 'No metrics yet. Lines such as ', h('code', {}, 'epoch=1 loss=0.42 acc=0.91 samples/s=5200'), ' are charted here.'),
    );
  }

  function lastValue(key: string): string {
    const last = [...parser.points].reverse().find((p) => key in p.values);
    return last ? `last ${last.values[key]}` : '';
  }

  root.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/clusters' }, 'Clusters'), ' / ', h('a', { href: `#/clusters/${encodeURIComponent(job.cluster)}` }, job.cluster), ' / job ', id),
    h('h1', {}, `Job ${id}`),
    h('div', { class: 'grid' }, h('section', { class: 'card', 'aria-label': 'Job' }, info), h('section', { class: 'card', 'aria-labelledby': 'chart-title' }, h('h2', { id: 'chart-title' }, 'Training progress'), charts)),
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'log-title' },
      h('div', { class: 'toolbar' }, h('h2', { id: 'log-title' }, 'Log'), h('label', { class: 'check' }, follow, 'Follow')),
      log,
    ),
  );
  renderInfo();
  renderCharts();

  const abort = new AbortController();
  ctx.onLeave(() => abort.abort());

  function append(text: string): void {
    log.append(text);
    if ((log.textContent?.length ?? 0) > kMaxLogChars) log.textContent = log.textContent!.slice(-kMaxLogChars / 2);
    if (follow.checked) log.scrollTop = log.scrollHeight;
    if (parser.push(text)) renderCharts();
  }

  ctx.api
    .followLog(id, append, abort.signal)
    .then(async () => {
      if (parser.finish()) renderCharts();
      job = await ctx.api.getJob(id);
      renderInfo();
    })
    .catch((e) => {
      if (!abort.signal.aborted) ctx.notify(describe(e), 'error');
    });

  ctx.poll(async () => {
    job = await ctx.api.getJob(id);
    renderInfo();
  }, 2000);
}

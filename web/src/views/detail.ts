// One cluster: Jupyter in its launcher, its containers (each with a terminal), the hostfile the
// platform maintains, what happened to it, a scale panel, and its jobs, each
// run in the container the user picks (the launcher by default).

import { ApiError, type Cluster, type Container, type Job } from '../api';
import type { Context } from '../app';
import { describe } from '../app';
import { age, h, keepFocus, phaseBadge, replace } from '../dom';
import { checkContainers, parseCount } from '../validate';
import { frameworkLabel, gpuSummary, runningCount } from './clusters';
import { confirmDialog } from './dialog';
import { plainMessage } from './fields';
import { eventFilters, jobFilters } from './filters';

function section(id: string, title: string, ...children: (Node | null)[]): HTMLElement {
  return h('section', { class: 'card', id, 'aria-labelledby': `${id}-title` }, h('h2', { id: `${id}-title` }, title), ...children);
}

function time(iso: string | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

export function jobRow(job: Job): HTMLElement {
  return h(
    'tr',
    { 'data-job': job.id },
    h('th', { scope: 'row' }, h('a', { href: `#/jobs/${encodeURIComponent(job.id)}` }, job.id)),
    h('td', { class: 'mono', 'data-col': 'container' }, job.container ?? '—'),
    h('td', { class: 'mono' }, job.command),
    h('td', {}, phaseBadge(job.phase)),
    h('td', { class: 'num' }, job.exit_code === null ? '—' : String(job.exit_code)),
    h('td', { title: job.started ?? '' }, age(job.started)),
  );
}

// What changed between two renders of the containers, in words for the
// live region: "kb-worker-2 is Creating." for each container whose phase is
// new, "kb-worker-3 left." for each one gone. Nothing on the first render.
export function phaseChanges(before: Map<string, string> | null, containers: { name: string; phase: string }[]): string {
  if (!before) return '';
  const now = new Map(containers.map((c) => [c.name, c.phase]));
  const changed = containers.filter((c) => before.get(c.name) !== c.phase).map((c) => `${c.name} is ${c.phase}.`);
  const gone = [...before.keys()].filter((n) => !now.has(n)).map((n) => `${n} left.`);
  return [...changed, ...gone].join(' ');
}

// The containers table's columns: Node and Slurm job only when Slurm placed
// the containers (edtd --backend slurm), Message only when a container has
// one (a Pending one's says why its Slurm job waits); a local cluster's table
// has neither.
export function containerColumns(containers: Container[]): string[] {
  const slurm = containers.some((c) => c.slurm_job !== undefined);
  const message = containers.some((c) => c.message);
  return ['Name', 'Role', 'Phase', 'Hostname', 'Address', 'GPUs', ...(slurm ? ['Node', 'Slurm job'] : []), ...(message ? ['Message'] : []), ''];
}

// A container's GPUs: how many (and the model), never an index alone, which
// reads as a count ("0" for the launcher's one GPU); the indices in the title.
export function gpuCell(gpus: string[], model: string | undefined): HTMLElement {
  const text = gpus.length ? `${gpus.length}${model ? ` × ${model}` : ''}` : '—';
  const title = gpus.length ? `GPU ${gpus.length > 1 ? 'indices' : 'index'} ${gpus.join(', ')} of edtd's inventory` : 'no GPU';
  return h('td', { 'data-label': 'GPUs', 'data-col': 'gpus', title }, text);
}

// Where a job starts when no directory is given (Service::start_job): the
// first volume's mount, else the home of the container's user.
export function defaultJobDirectory(cluster: Cluster): string {
  return cluster.mounts?.[0]?.path ?? '';
}

// Settled: neither the cluster nor any container is on its way somewhere
// (a Failed one is settled too: nothing more comes by polling faster).
const kMoving = new Set(['Pending', 'Creating', 'Scaling', 'Deleting', 'Draining', 'Stopping']);
function settled(cluster: Cluster): boolean {
  return !kMoving.has(cluster.phase) && cluster.container_status.length === cluster.containers && cluster.container_status.every((c) => !kMoving.has(c.phase));
}

export async function detailView(ctx: Context, root: HTMLElement, params: Record<string, string>): Promise<void> {
  const name = params['name'];
  let cluster: Cluster = await ctx.api.getCluster(name);

  const summary = h('dl', { class: 'summary' });
  // The header follows the columns the containers need (containerColumns).
  const containersHead = h('thead');
  let shownColumns = '';
  const containersBody = h('tbody');
  // Each container's phase change, said by screen readers as it happens.
  const containersLive = h('p', { class: 'help', id: 'containers-live', role: 'status', 'aria-live': 'polite' });
  let shownPhases: Map<string, string> | null = null;
  const hostfile = h('pre', { class: 'hostfile', id: 'hostfile', tabindex: '0', role: 'region', 'aria-label': 'Hostfile' });
  const events = h('ol', { class: 'events', id: 'events' });
  const jobsBody = h('tbody');
  const eventFilter = eventFilters(() => void loadEvents());
  const jobFilter = jobFilters(() => void loadJobs());

  // Scale panel; `scaling` while the banner of a scale asked here shows.
  let scaling = false;
  const scaleInput = h('input', { type: 'number', id: 'scale-containers', min: 2, step: 1, class: 'short', value: cluster.containers, 'aria-describedby': 'scale-help scale-error' });
  const scaleError = h('p', { class: 'field-error', id: 'scale-error', role: 'alert' });
  const scaleHelp = h('p', { class: 'help', id: 'scale-help' });
  const scaleForm = h(
    'form',
    { class: 'inline', id: 'scale-form', novalidate: true },
    h('label', { for: 'scale-containers' }, 'Containers'),
    scaleInput,
    h('button', { type: 'submit', id: 'scale-submit' }, 'Scale'),
  );

  // Run panel.
  const command = h('input', {
    type: 'text',
    id: 'job-command',
    class: 'mono grow',
    spellcheck: 'false',
    placeholder: 'edtrun -np 2 --hostfile /etc/mpi/hostfile python3 train_mnist.py',
    'aria-describedby': 'job-error',
  });
  const jobError = h('p', { class: 'field-error', id: 'job-error', role: 'alert' });
  const jobCwd = h('input', {
    type: 'text',
    id: 'job-cwd',
    class: 'mono',
    spellcheck: 'false',
    autocomplete: 'off',
    placeholder: defaultJobDirectory(cluster) || '~ (home)',
    'aria-describedby': 'job-cwd-help job-cwd-error',
  });
  const jobCwdError = h('p', { class: 'field-error', id: 'job-cwd-error', role: 'alert' });
  const jobCwdHelp = h(
    'p',
    { class: 'help', id: 'job-cwd-help' },
    defaultJobDirectory(cluster)
      ? `The command starts in ${defaultJobDirectory(cluster)}, where the first volume is mounted (as in Jupyter), unless you give another directory.`
      : "The command starts in the home of the container's user unless you give another directory.",
  );
  // Where the command runs: the launcher unless another container is picked.
  const jobContainer = h('select', { id: 'job-container', class: 'auto', 'aria-describedby': 'job-container-error' });
  const jobContainerError = h('p', { class: 'field-error', id: 'job-container-error', role: 'alert' });
  const runForm = h(
    'form',
    { class: 'inline', id: 'run-form', novalidate: true },
    h('label', { for: 'job-container' }, 'Run in'),
    jobContainer,
    h('label', { for: 'job-cwd' }, 'in'),
    jobCwd,
    h('label', { for: 'job-command' }, 'Command'),
    command,
    h('button', { type: 'submit', id: 'run-submit' }, 'Run'),
  );

  // Keeps the picked container while the list follows the cluster's.
  function renderContainerChoice(): void {
    const picked = jobContainer.value;
    const names = cluster.container_status.map((c) => c.name);
    if (names.join() === [...jobContainer.options].map((o) => o.value).join()) return;
    replace(
      jobContainer,
      cluster.container_status.map((c) => h('option', { value: c.name, selected: c.name === picked }, `${c.name}${c.role === 'launcher' ? ' (launcher)' : ''}`)),
    );
  }

  function renderCluster(): void {
    const launcher = cluster.container_status.find((c) => c.role === 'launcher') ?? cluster.container_status[0];
    replace(
      summary,
      ...[
        ['Phase', phaseBadge(cluster.phase)],
        ['Framework', frameworkLabel(cluster.framework)],
        ['Containers', runningCount(cluster) + ' Running'],
        ['Image', cluster.image ?? '—'],
        ['GPUs', gpuSummary(cluster)],
        ['Shared memory', cluster.shm ?? '—'],
        ['Memory per container', cluster.memory ?? 'no bound'],
        ['CPUs per container', cluster.cpus ?? 'no bound'],
        ['Drain timeout', cluster.drain_timeout ?? '—'],
        ['Volumes', cluster.mounts?.length ? cluster.mounts.map((m) => `${m.volume} → ${m.path}${m.read_only ? ' (ro)' : ''}`).join(', ') : '—'],
        ['Created', time(cluster.created)],
      ].flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
      cluster.message ? [h('dt', {}, 'Message'), h('dd', { class: 'message' }, cluster.message)] : [],
      cluster.queued ? [h('dt', {}, 'Queued'), h('dd', { id: 'queued' }, `#${cluster.queued.position} for ${cluster.queued.containers} containers: ${cluster.queued.reason} (delete the cluster to cancel)`)] : [],
    );
    const columns = containerColumns(cluster.container_status);
    if (columns.join('|') !== shownColumns) {
      shownColumns = columns.join('|');
      replace(containersHead, h('tr', {}, columns.map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'sr-only' }, 'Actions')))));
    }
    const slurm = columns.includes('Slurm job');
    const messages = columns.includes('Message');
    replace(
      containersBody,
      cluster.container_status.map((c) =>
        h(
          'tr',
          { 'data-container': c.name },
          h('th', { scope: 'row' }, c.name),
          h('td', { 'data-label': 'Role' }, c.role),
          h('td', { 'data-label': 'Phase' }, phaseBadge(c.phase)),
          h('td', { 'data-label': 'Hostname', class: 'mono' }, c.hostname || '—'),
          h('td', { 'data-label': 'Address', class: 'mono' }, c.address || '—'),
          gpuCell(c.gpus, cluster.gpu?.model),
          slurm ? h('td', { 'data-label': 'Node', 'data-col': 'node', class: 'mono' }, c.node || '—') : null,
          slurm ? h('td', { 'data-label': 'Slurm job', 'data-col': 'slurm-job', class: 'num' }, c.slurm_job === undefined ? '—' : String(c.slurm_job)) : null,
          messages ? h('td', { 'data-label': 'Message', 'data-col': 'message', class: 'message' }, c.message ?? '') : null,
          h(
            'td',
            {},
            h('a', { class: 'button small secondary', href: `#/clusters/${encodeURIComponent(name)}/terminal/${encodeURIComponent(c.name)}`, 'aria-label': `Terminal in ${c.name}` }, 'Terminal'),
          ),
        ),
      ),
    );
    const changes = phaseChanges(shownPhases, cluster.container_status);
    if (changes) containersLive.textContent = changes;
    shownPhases = new Map(cluster.container_status.map((c) => [c.name, c.phase]));
    // Newest first; edtd's order, not the times, which may tie to the millisecond.
    const sorted = [...cluster.events].reverse();
    replace(
      events,
      sorted.length
        ? sorted.map((e) => h('li', { 'data-type': e.type }, h('time', { datetime: e.time }, time(e.time)), h('span', { class: `event-type event-${e.type.toLowerCase()}` }, e.type), h('span', {}, e.message)))
        : h('li', { class: 'muted' }, eventFilter.value().type || eventFilter.value().since ? 'No events match the filter.' : 'No events recorded.'),
    );
    renderContainerChoice();
    jobFilter.setContainers(cluster.container_status.map((c) => c.name));
    if (launcher) openTerminal.setAttribute('href', `#/clusters/${encodeURIComponent(name)}/terminal/${encodeURIComponent(launcher.name)}`);
    const running = cluster.container_status.filter((c) => c.phase === 'Running').length;
    const draining = cluster.container_status.filter((c) => c.phase === 'Draining').length;
    scaleHelp.textContent =
      cluster.phase === 'Scaling' || running !== cluster.containers
        ? `Scaling to ${cluster.containers}: ${running} of ${cluster.containers} Running${draining ? `, ${draining} Draining (waiting for their edtrun workers to leave the job)` : ''}.`
        : `Now ${cluster.containers} containers (1 launcher, ${cluster.containers - 1} worker${cluster.containers > 2 ? 's' : ''}). New workers join the hostfile once Running; removed ones leave it first and are Draining until their edtrun workers have left the job (at most ${cluster.drain_timeout ?? 'the drain timeout'}).`;
    // The banner of a scale goes once it is done (the Scale panel says so).
    if (scaling && settled(cluster) && running === cluster.containers) {
      scaling = false;
      ctx.notify('');
    }
    if (cluster.framework === 'slurm')
      scaleHelp.textContent +=
        ' Each container is a Slurm node: a new one registers with slurmctld; a removed one leaves Slurm at once (its node goes DOWN and is deleted: batch jobs on it are requeued, job steps on it end).';
  }

  scaleForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    scaleError.textContent = '';
    scaleInput.removeAttribute('aria-invalid');
    const problem = checkContainers(scaleInput.value);
    const target = parseCount(scaleInput.value);
    if (problem || target === null) {
      scaleError.textContent = problem ?? '';
      scaleInput.setAttribute('aria-invalid', 'true');
      scaleInput.focus();
      return;
    }
    if (target === cluster.containers) {
      scaleError.textContent = `${name} has ${target} containers already.`;
      scaleInput.focus();
      return;
    }
    const ok = await confirmDialog({
      title: `Scale ${name} from ${cluster.containers} to ${target} containers?`,
      body:
        target > cluster.containers
          ? `${target - cluster.containers} worker${target - cluster.containers > 1 ? 's' : ''} will be added and join the hostfile once Running.`
          : `The ${cluster.containers - target} highest-numbered worker${cluster.containers - target > 1 ? 's' : ''} will leave the hostfile and stop (their processes get SIGTERM, then SIGKILL).`,
      confirm: 'Scale',
    });
    if (!ok) return;
    try {
      // The answer has no events; the list stays until the next poll.
      cluster = { ...(await ctx.api.scaleCluster(name, target)), events: cluster.events };
      scaling = true;
      renderCluster();
      ctx.notify(`Scaling ${name} to ${target} containers.`);
    } catch (err) {
      scaleError.textContent = describe(err).replace(/ \(field .*\)$/, '');
      scaleInput.setAttribute('aria-invalid', 'true');
      scaleInput.focus();
    }
  });

  runForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    jobError.textContent = '';
    jobContainerError.textContent = '';
    jobCwdError.textContent = '';
    jobContainer.removeAttribute('aria-invalid');
    jobCwd.removeAttribute('aria-invalid');
    if (!command.value.trim()) {
      jobError.textContent = `Enter a command to run in ${jobContainer.value || 'the launcher'}, e.g. hostname.`;
      command.focus();
      return;
    }
    try {
      const job = await ctx.api.runJob(name, command.value.trim(), jobContainer.value || undefined, jobCwd.value.trim() || undefined);
      ctx.navigate(`#/jobs/${encodeURIComponent(job.id)}`);
    } catch (err) {
      // edtd names the field: "container" (not Running, not this cluster's), "cwd" or "command".
      const beside = err instanceof ApiError ? ({ container: [jobContainer, jobContainerError], cwd: [jobCwd, jobCwdError] } as const)[err.field as 'container' | 'cwd'] : undefined;
      if (beside) {
        const [control, error] = beside;
        error.textContent = plainMessage(err);
        control.setAttribute('aria-invalid', 'true');
        control.focus();
      } else {
        jobError.textContent = describe(err);
        command.focus();
      }
    }
  });

  const openTerminal = h('a', { class: 'button', id: 'open-terminal', href: '#' }, 'Open terminal in launcher');
  // Jupyter opens in a tab of its own, made at the click (a tab opened after
  // the await would be a blocked pop-up); if it cannot start, the tab
  // closes and the reason shows next to the button.
  const jupyterError = h('p', { class: 'field-error', id: 'jupyter-error', role: 'alert' });
  const openJupyter = h(
    'button',
    {
      type: 'button',
      id: 'open-jupyter',
      onclick: async () => {
        jupyterError.textContent = '';
        const tab = window.open('', '_blank');
        openJupyter.setAttribute('disabled', 'true');
        openJupyter.textContent = 'Starting Jupyter…';
        try {
          const url = await ctx.api.openJupyter(name);
          if (tab) {
            tab.opener = null;
            tab.location.href = url;
          } else {
            window.location.assign(url);
          }
        } catch (err) {
          tab?.close();
          jupyterError.textContent = `Jupyter: ${describe(err)}`;
        } finally {
          openJupyter.removeAttribute('disabled');
          openJupyter.textContent = 'Open Jupyter';
        }
      },
    },
    'Open Jupyter',
  );
  const deleteButton = h(
    'button',
    {
      type: 'button',
      class: 'danger',
      onclick: async () => {
        const ok = await confirmDialog({ title: `Delete ${name}?`, body: 'Every container stops and its files go; volumes stay.', confirm: 'Delete', danger: true });
        if (!ok) return;
        try {
          await ctx.api.deleteCluster(name);
          ctx.navigate('#/clusters');
        } catch (err) {
          ctx.notify(describe(err), 'error');
        }
      },
    },
    'Delete',
  );

  root.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/clusters' }, 'Clusters'), ' / ', name),
    h('div', { class: 'toolbar' }, h('h1', {}, name), h('div', { class: 'actions' }, openJupyter, openTerminal, deleteButton)),
    jupyterError,
    h(
      'div',
      { class: 'grid' },
      section('overview', 'Overview', summary),
      section('scale', 'Scale', scaleForm, scaleHelp, scaleError),
      section(
        'containers',
        'Containers',
        h(
          'div',
          { class: 'scroll', role: 'region', 'aria-label': 'Containers table', tabindex: '0' },
          h(
            'table',
            { class: 'list', id: 'containers-table' },
            containersHead,
            containersBody,
          ),
        ),
        containersLive,
      ),
      section('hostfile-section', 'Hostfile (/etc/mpi/hostfile)', hostfile),
      section('events-section', 'Events', eventFilter.el, events),
      section(
        'jobs',
        'Jobs',
        h('p', { class: 'help' }, 'A command runs in the container picked (the launcher unless you pick another), as with ', h('code', {}, 'edt run'), '; its output is kept.'),
        runForm,
        jobCwdHelp,
        jobContainerError,
        jobCwdError,
        jobError,
        jobFilter.el,
        h(
          'div',
          { class: 'scroll', role: 'region', 'aria-label': 'Jobs table', tabindex: '0' },
          h('table', { class: 'list', id: 'jobs-table' }, h('thead', {}, h('tr', {}, ['Job', 'Container', 'Command', 'Phase', 'Exit', 'Started'].map((t) => h('th', { scope: 'col' }, t)))), jobsBody),
        ),
      ),
    ),
  );
  renderCluster();

  ctx.poll(async () => {
    try {
      cluster = await ctx.api.getCluster(name);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        ctx.notify(`Cluster ${name} is gone.`, 'error');
        return;
      }
      throw e;
    }
    await loadEvents();
    const text = await ctx.api.hostfile(name);
    if (hostfile.textContent !== text) hostfile.textContent = text;
  }, () => (settled(cluster) ? 1500 : 400));

  // A filter edtd refuses (400) is shown beside the filter, and the list empties.
  async function filtered<T>(load: () => Promise<T[]>, setError: (message: string | null) => void): Promise<T[]> {
    try {
      const items = await load();
      setError(null);
      return items;
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 400)) throw err;
      setError(plainMessage(err));
      return [];
    }
  }

  async function loadEvents(): Promise<void> {
    cluster.events = await filtered(() => ctx.api.listEvents(name, eventFilter.value()), eventFilter.setError);
    keepFocus(root, renderCluster);
  }

  async function loadJobs(): Promise<void> {
    const filter = jobFilter.value();
    const jobs = (await filtered(() => ctx.api.listJobs(name, filter), jobFilter.setError)).sort((a, b) => (b.started ?? '').localeCompare(a.started ?? ''));
    const empty = filter.state || filter.container ? 'No jobs match the filter.' : 'No jobs yet.';
    replace(jobsBody, jobs.length ? jobs.map(jobRow) : h('tr', {}, h('td', { colspan: 6, class: 'empty' }, empty)));
  }

  ctx.poll(loadJobs, 3000);
}

import { describe, expect, it, vi } from 'vitest';
import { toCluster } from '../api';
import { fakeContext } from './fake-edtd';
import { defaultJobDirectory, detailView, gpuCell, phaseChanges } from './detail';

describe('phaseChanges', () => {
  const two = [
    { name: 'kb-launcher', phase: 'Running' },
    { name: 'kb-worker-0', phase: 'Running' },
  ];

  it('says nothing on the first render, nor when nothing changed', () => {
    expect(phaseChanges(null, two)).toBe('');
    expect(phaseChanges(new Map(two.map((c) => [c.name, c.phase])), two)).toBe('');
  });

  it('names each container that is new or changed its phase, and each one gone', () => {
    const before = new Map([...two.map((c) => [c.name, c.phase] as [string, string]), ['kb-worker-2', 'Draining']]);
    const now = [...two, { name: 'kb-worker-1', phase: 'Creating' }];
    now[1] = { name: 'kb-worker-0', phase: 'Failed' };
    expect(phaseChanges(before, now)).toBe('kb-worker-0 is Failed. kb-worker-1 is Creating. kb-worker-2 left.');
  });
});

// detailView against a fake edtd that knows one cluster; one poll, no timers.
// Given two answers, the view's first GET gets the first, the poll the second.
async function showCluster(cluster: unknown, polled = cluster): Promise<HTMLElement> {
  const name = (cluster as { name: string }).name;
  let gets = 0;
  const answers: Record<string, unknown> = {
    get [`/api/v1/clusters/${name}`]() {
      return gets++ ? polled : cluster;
    },
    [`/api/v1/clusters/${name}/events`]: { events: [] },
    [`/api/v1/clusters/${name}/jobs`]: { jobs: [] },
    [`/api/v1/clusters/${name}/hostfile`]: '',
  };
  const fetch = vi.fn(async (url: string) => {
    if (!(url in answers)) return new Response('{}', { status: 404 });
    const body = answers[url];
    return new Response(typeof body === 'string' ? body : JSON.stringify(body), { status: 200 });
  });
  const { ctx, root } = fakeContext(fetch as unknown as typeof globalThis.fetch);
  await detailView(ctx, root, { name });
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
  return root;
}

const headers = (root: HTMLElement) => [...root.querySelectorAll('#containers-table thead th')].map((t) => t.textContent);
const cell = (root: HTMLElement, container: string, col: string) => root.querySelector(`#containers-table tr[data-container="${container}"] [data-col="${col}"]`)?.textContent;

describe('the containers table', () => {
  it('shows each container’s Slurm node and job, and why a pending one waits', async () => {
    const root = await showCluster({
      name: 'sl',
      framework: 'horovod',
      containers: 3,
      status: {
        phase: 'Scaling',
        containers: [
          { name: 'sl-launcher', role: 'launcher', phase: 'Running', message: '', hostname: 'sl-launcher', address: '10.9.0.2', gpus: [], node: 'edtsh-n1', slurm_job: 4 },
          { name: 'sl-worker-0', role: 'worker', phase: 'Running', message: 'restarted after it stopped (Slurm job 3 on edtsh-n3 ended: CANCELLED)', node: 'edtsh-n2', slurm_job: 5 },
          { name: 'sl-worker-1', role: 'worker', phase: 'Pending', message: 'Slurm job 6 is PENDING: Resources', node: '', slurm_job: 6 },
        ],
      },
    });
    expect(headers(root)).toEqual(['Name', 'Role', 'Phase', 'Hostname', 'Address', 'GPUs', 'Node', 'Slurm job', 'Message', 'Actions']);
    expect([cell(root, 'sl-launcher', 'node'), cell(root, 'sl-launcher', 'slurm-job'), cell(root, 'sl-launcher', 'message')]).toEqual(['edtsh-n1', '4', '']);
    expect([cell(root, 'sl-worker-1', 'node'), cell(root, 'sl-worker-1', 'slurm-job')]).toEqual(['—', '6']);
    expect(cell(root, 'sl-worker-1', 'message')).toBe('Slurm job 6 is PENDING: Resources');
    expect(cell(root, 'sl-worker-0', 'message')).toBe('restarted after it stopped (Slurm job 3 on edtsh-n3 ended: CANCELLED)');
    // Each row has a cell under each header.
    for (const row of root.querySelectorAll('#containers-table tbody tr')) expect(row.children.length).toBe(10);
  });

  it('looks as before for a local cluster', async () => {
    const root = await showCluster({
      name: 'lo',
      framework: 'horovod',
      containers: 2,
      status: {
        phase: 'Running',
        containers: [
          { name: 'lo-launcher', role: 'launcher', phase: 'Running', message: '', hostname: 'lo-launcher', address: '127.77.0.2', gpus: [0] },
          { name: 'lo-worker-0', role: 'worker', phase: 'Running', message: '', hostname: 'lo-worker-0', address: '127.77.0.3', gpus: [1] },
        ],
      },
    });
    expect(headers(root)).toEqual(['Name', 'Role', 'Phase', 'Hostname', 'Address', 'GPUs', 'Actions']);
    expect([...root.querySelectorAll('#containers-table [data-col]')].map((c) => c.getAttribute('data-col'))).toEqual(['gpus', 'gpus']);
    for (const row of root.querySelectorAll('#containers-table tbody tr')) expect(row.children.length).toBe(7);
  });

  it('counts GPUs: the launcher holding GPU 0 shows 1, never a lone 0; the indices are in the title', async () => {
    const root = await showCluster({
      name: 'g',
      framework: 'horovod',
      containers: 2,
      gpu: { model: 'NVIDIA-P4', count: 2 },
      status: {
        phase: 'Running',
        containers: [
          { name: 'g-launcher', role: 'launcher', phase: 'Running', message: '', gpus: [0, 1] },
          { name: 'g-worker-0', role: 'worker', phase: 'Running', message: '', gpus: [] },
        ],
      },
    });
    expect(cell(root, 'g-launcher', 'gpus')).toBe('2 × NVIDIA-P4');
    expect(root.querySelector('tr[data-container="g-launcher"] [data-col="gpus"]')?.getAttribute('title')).toBe("GPU indices 0, 1 of edtd's inventory");
    expect(cell(root, 'g-worker-0', 'gpus')).toBe('—');
    expect(gpuCell(['0'], 'NVIDIA-P4').textContent).toBe('1 × NVIDIA-P4');
    expect(gpuCell(['0'], undefined).getAttribute('title')).toBe("GPU index 0 of edtd's inventory");
  });

  it('says where a job starts: the first volume, else the home', () => {
    expect(defaultJobDirectory(toCluster({ name: 'c', framework: 'horovod', containers: 2, mounts: [{ volume: 'data', path: '/root/data' }, { volume: 'b', path: '/b' }] }))).toBe('/root/data');
    expect(defaultJobDirectory(toCluster({ name: 'c', framework: 'horovod', containers: 2 }))).toBe('');
  });

  it("shows a local container's message, without the Slurm columns", async () => {
    const root = await showCluster({
      name: 'lm',
      framework: 'horovod',
      containers: 2,
      status: {
        phase: 'Running',
        containers: [
          { name: 'lm-launcher', role: 'launcher', phase: 'Running', message: '' },
          { name: 'lm-worker-0', role: 'worker', phase: 'Running', message: 'restarted after it stopped (exit 137)' },
        ],
      },
    });
    expect(headers(root)).toEqual(['Name', 'Role', 'Phase', 'Hostname', 'Address', 'GPUs', 'Message', 'Actions']);
    expect(cell(root, 'lm-worker-0', 'message')).toBe('restarted after it stopped (exit 137)');
    expect(cell(root, 'lm-worker-0', 'node')).toBeUndefined();
  });

  it('gains the columns when a poll brings a Slurm job and a message', async () => {
    const launcher = { name: 'sp-launcher', role: 'launcher', phase: 'Running', message: '', node: 'edtsh-n1', slurm_job: 7 };
    const before = { name: 'sp', framework: 'horovod', containers: 2, status: { phase: 'Creating', containers: [{ ...launcher, node: undefined, slurm_job: undefined, phase: 'Creating' }] } };
    const after = { ...before, status: { phase: 'Scaling', containers: [launcher, { name: 'sp-worker-0', role: 'worker', phase: 'Pending', message: 'Slurm job 8 is PENDING: Resources', node: '', slurm_job: 8 }] } };
    const root = await showCluster(before, after);
    expect(headers(root)).toEqual(['Name', 'Role', 'Phase', 'Hostname', 'Address', 'GPUs', 'Node', 'Slurm job', 'Message', 'Actions']);
    expect([cell(root, 'sp-launcher', 'node'), cell(root, 'sp-launcher', 'slurm-job')]).toEqual(['edtsh-n1', '7']);
    expect(cell(root, 'sp-worker-0', 'message')).toBe('Slurm job 8 is PENDING: Resources');
  });
});
